"""Inventory seeding against moto DynamoDB."""

from __future__ import annotations

from typing import Any

import pytest

from saga.sandbox.inventory import DEFAULT_STOCK, read_available, seed_inventory
from tests.tables import SandboxTables

TABLES = SandboxTables()


def test_seed_writes_one_item_per_sku_with_an_integer_available(sandbox_client: Any) -> None:
    seed_inventory(sandbox_client, TABLES.inventory, DEFAULT_STOCK)

    items = sandbox_client.scan(TableName=TABLES.inventory)["Items"]
    assert {item["sku"]["S"]: int(item["available"]["N"]) for item in items} == {
        "SKU-RED-MUG": 100,
        "SKU-BLUE-MUG": 5,
        "SKU-EMPTY": 0,
    }


def test_seeding_again_resets_to_the_seeded_level_without_duplicates(sandbox_client: Any) -> None:
    seed_inventory(sandbox_client, TABLES.inventory, DEFAULT_STOCK)
    sandbox_client.update_item(
        TableName=TABLES.inventory,
        Key={"sku": {"S": "SKU-RED-MUG"}},
        UpdateExpression="SET available = available - :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    assert read_available(sandbox_client, TABLES.inventory, "SKU-RED-MUG") == 99

    seed_inventory(sandbox_client, TABLES.inventory, DEFAULT_STOCK)

    assert read_available(sandbox_client, TABLES.inventory, "SKU-RED-MUG") == 100
    assert sandbox_client.scan(TableName=TABLES.inventory, Select="COUNT")["Count"] == 3


def test_bad_seed_is_refused_before_anything_is_written(sandbox_client: Any) -> None:
    with pytest.raises(ValueError, match="SKU-BAD: available must be a non-negative integer"):
        seed_inventory(sandbox_client, TABLES.inventory, {"SKU-OK": 3, "SKU-BAD": -1})

    assert sandbox_client.scan(TableName=TABLES.inventory, Select="COUNT")["Count"] == 0
    assert read_available(sandbox_client, TABLES.inventory, "SKU-OK") is None
