"""Key schemas of the sandbox tables (docs/architecture.md "Tables"), for tests and tooling.

The stack declares the same tables in CDK; this module creates them directly with boto3 where
there is no CloudFormation (moto in-process tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class SandboxTables:
    payments: str = "payments"
    shipments: str = "shipments"
    sandbox: str = "sandbox"
    inventory: str = "inventory"


def table_definitions(names: SandboxTables) -> list[dict[str, Any]]:
    def simple(table: str, key: str) -> dict[str, Any]:
        return {
            "TableName": table,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
        }

    return [
        simple(names.payments, "refund_id"),
        simple(names.shipments, "shipment_id"),
        simple(names.sandbox, "pk"),
        simple(names.inventory, "sku"),
    ]


def create_sandbox_tables(client: DynamoDBClient, names: SandboxTables) -> None:
    for definition in table_definitions(names):
        client.create_table(**definition)
    client.update_time_to_live(
        TableName=names.sandbox,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )
