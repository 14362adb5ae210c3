"""The stack's tables for tests without CloudFormation (moto's in-process `mock_aws`).

Each table is created from the synthesized template (the session fixture `stack_tables`, in
tests/conftest.py) by local_aws.tables, the code that provisions the local AWS, under a
name the test chooses: a test can only exercise the key schema, indexes and TTL the stack
deploys. tests/infra/test_test_table_schemas.py checks the names below against the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from local_aws.tables import StackTables

# A function's environment variable (saga.settings) -> the stack output naming the same table.
OUTPUT_OF_VARIABLE: Mapping[str, str] = {
    "LEDGER_TABLE": "LedgerTableName",
    "CASES_TABLE": "CasesTableName",
    "DRAFTS_TABLE": "DraftsTableName",
    "LEGACY_DRAFTS_TABLE": "LegacyDraftsTableName",
    "INVENTORY_TABLE": "InventoryTableName",
    "RESERVATIONS_TABLE": "ReservationsTableName",
    "PAYMENTS_TABLE": "PaymentsTableName",
    "SHIPMENTS_TABLE": "ShipmentsTableName",
    "SANDBOX_TABLE": "SandboxTableName",
    "LIMITS_TABLE": "LimitsTableName",
}


@dataclass(frozen=True)
class SandboxTables:
    """The names of the tables the sandbox downstreams use, in a test."""

    payments: str = "payments"
    shipments: str = "shipments"
    sandbox: str = "sandbox"
    inventory: str = "inventory"

    def outputs(self) -> dict[str, str]:
        return {
            "PaymentsTableName": self.payments,
            "ShipmentsTableName": self.shipments,
            "SandboxTableName": self.sandbox,
            "InventoryTableName": self.inventory,
        }


def create_by_variable(tables: StackTables, client: Any, names: Mapping[str, str]) -> None:
    """Create the tables `names` maps (environment variable -> the name to create it under)."""
    tables.create(client, {OUTPUT_OF_VARIABLE[variable]: name for variable, name in names.items()})
