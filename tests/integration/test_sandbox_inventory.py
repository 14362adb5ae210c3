"""Inventory seeding against moto DynamoDB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from saga.sandbox.inventory import DEFAULT_STOCK, read_available, seed_inventory
from saga.sandbox.schema import SandboxTables, create_sandbox_tables

TABLES = SandboxTables()


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_sandbox_tables(dynamodb, TABLES)
        yield dynamodb


def test_seed_writes_one_item_per_sku_with_an_integer_available(client: Any) -> None:
    seed_inventory(client, TABLES.inventory, DEFAULT_STOCK)

    items = client.scan(TableName=TABLES.inventory)["Items"]
    assert {item["sku"]["S"]: int(item["available"]["N"]) for item in items} == {
        "SKU-RED-MUG": 100,
        "SKU-BLUE-MUG": 5,
        "SKU-EMPTY": 0,
    }


def test_seeding_again_resets_to_the_seeded_level_without_duplicates(client: Any) -> None:
    seed_inventory(client, TABLES.inventory, DEFAULT_STOCK)
    client.update_item(
        TableName=TABLES.inventory,
        Key={"sku": {"S": "SKU-RED-MUG"}},
        UpdateExpression="SET available = available - :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    assert read_available(client, TABLES.inventory, "SKU-RED-MUG") == 99

    seed_inventory(client, TABLES.inventory, DEFAULT_STOCK)

    assert read_available(client, TABLES.inventory, "SKU-RED-MUG") == 100
    assert client.scan(TableName=TABLES.inventory, Select="COUNT")["Count"] == 3


def test_bad_seed_is_refused_before_anything_is_written(client: Any) -> None:
    with pytest.raises(ValueError, match="SKU-BAD: available must be a non-negative integer"):
        seed_inventory(client, TABLES.inventory, {"SKU-OK": 3, "SKU-BAD": -1})

    assert client.scan(TableName=TABLES.inventory, Select="COUNT")["Count"] == 0
    assert read_available(client, TABLES.inventory, "SKU-OK") is None
