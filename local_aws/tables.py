"""The DynamoDB tables of a synthesized template, created in any DynamoDB client.

The one table creator for every place that needs the stack's tables without CloudFormation: the
local AWS provisions them (local_aws.provision), and the moto-backed tests and the ledger
benchmark create them under names of their own in moto's in-process `mock_aws`. What DynamoDB
itself enforces is created as the template declares it: key schema, attribute definitions,
indexes, streams, TTL, point-in-time recovery. Capacity settings mean nothing locally.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TABLE_TYPES = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")
_INDEX_KEYS = ("IndexName", "KeySchema", "Projection")


def create_table(client: Any, name: str, properties: Mapping[str, Any]) -> None:
    """Create one table from its template properties (intrinsic functions resolved), then turn
    on its TTL and point-in-time recovery as declared."""
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        indexes = [{key: index[key] for key in _INDEX_KEYS} for index in properties.get(kind, [])]
        if indexes:
            request[kind] = indexes
    stream = properties.get("StreamSpecification")
    if stream and stream.get("StreamViewType"):
        request["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    client.create_table(**request)
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("AttributeName") and ttl.get("Enabled", True):
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
    if properties.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled"):
        client.update_continuous_backups(
            TableName=name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )


@dataclass(frozen=True)
class StackTables:
    """A template's tables, by the stack output that names each (`LedgerTableName`, ...): the
    names every client of the stack already uses for them (docs/design.md §8)."""

    properties: Mapping[str, Mapping[str, Any]]

    @classmethod
    def from_template(cls, template: Mapping[str, Any]) -> StackTables:
        resources = template.get("Resources", {})
        found: dict[str, Mapping[str, Any]] = {}
        for output, declared in template.get("Outputs", {}).items():
            value = declared.get("Value")
            logical_id = value.get("Ref") if isinstance(value, dict) and len(value) == 1 else None
            resource = resources.get(logical_id) if isinstance(logical_id, str) else None
            if resource is not None and resource.get("Type") in TABLE_TYPES:
                # A CDK table's schema holds no intrinsic function: it is used as declared.
                found[output] = resource.get("Properties", {})
        return cls(found)

    def create(self, client: Any, names: Mapping[str, str]) -> None:
        """Create the tables `names` maps (stack output -> the name to create it under)."""
        unknown = sorted(set(names) - set(self.properties))
        if unknown:
            raise KeyError(f"the template names no table as {unknown}: {sorted(self.properties)}")
        for output, name in names.items():
            create_table(client, name, self.properties[output])

    def index_names(self, output: str) -> list[str]:
        """The global secondary indexes of the table the output names."""
        return [
            str(index["IndexName"])
            for index in self.properties[output].get("GlobalSecondaryIndexes", [])
        ]
