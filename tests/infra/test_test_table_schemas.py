"""The tables the moto-backed tests create by hand are the tables the stack deploys.

Tests without CloudFormation create their tables with boto3 (tests/tools_harness.py, the
ledger harness, saga.sandbox.schema); this pins those definitions to the synthesized template,
so a key, index or TTL change in the stack cannot leave the tests exercising another schema.
"""

from __future__ import annotations

from typing import Any

from tests.infra.synth import Synthesized
from tests.tools_harness import TABLE_NAMES, create_tables

OUTPUT_OF_VARIABLE = {
    "LEDGER_TABLE": "LedgerTableName",
    "CASES_TABLE": "CasesTableName",
    "DRAFTS_TABLE": "DraftsTableName",
    "INVENTORY_TABLE": "InventoryTableName",
    "RESERVATIONS_TABLE": "ReservationsTableName",
    "PAYMENTS_TABLE": "PaymentsTableName",
    "SHIPMENTS_TABLE": "ShipmentsTableName",
    "SANDBOX_TABLE": "SandboxTableName",
}


class RecordingClient:
    """Just enough of a DynamoDB client to record what the test helpers create."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}

    def create_table(self, **request: Any) -> None:
        self.tables[request["TableName"]] = request

    def update_time_to_live(self, **request: Any) -> None:
        spec = request["TimeToLiveSpecification"]
        self.tables[request["TableName"]]["ttl"] = spec["AttributeName"]

    def update_continuous_backups(self, **_: Any) -> None:
        pass

    def put_item(self, **_: Any) -> None:  # the inventory seed
        pass


def _shape(definition: dict[str, Any]) -> dict[str, Any]:
    return {
        "keys": [(k["AttributeName"], k["KeyType"]) for k in definition["KeySchema"]],
        "attributes": sorted(
            (a["AttributeName"], a["AttributeType"]) for a in definition["AttributeDefinitions"]
        ),
        "indexes": sorted(
            (i["IndexName"], tuple((k["AttributeName"], k["KeyType"]) for k in i["KeySchema"]))
            for i in definition.get("GlobalSecondaryIndexes", [])
        ),
        "ttl": definition.get("ttl"),
    }


def test_hand_made_test_tables_match_the_deployed_ones(synthesized: Synthesized) -> None:
    recorder = RecordingClient()
    create_tables(recorder, TABLE_NAMES)
    outputs = synthesized.template_json["Outputs"]
    resources = synthesized.template_json["Resources"]

    for variable, output in OUTPUT_OF_VARIABLE.items():
        deployed = dict(resources[outputs[output]["Value"]["Ref"]]["Properties"])
        ttl = deployed.get("TimeToLiveSpecification")
        deployed["ttl"] = ttl["AttributeName"] if ttl and ttl.get("Enabled") else None
        assert _shape(recorder.tables[TABLE_NAMES[variable]]) == _shape(deployed), variable
