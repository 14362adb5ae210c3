"""DynamoDB request units as AWS bills them (sagactl/local/request_units.py), on moto's tables:
the item-size rules with AWS's own examples, and each kind of request the code makes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sagactl.local.request_units import (
    attribute_size,
    item_size,
    metering_request_units,
    number_size,
    read_units,
    write_units,
)

TABLE = "units"


def test_sizes_follow_the_documented_rules() -> None:
    assert attribute_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert number_size("12345") == 4  # 5 significant digits: 3 bytes, plus 1
    assert number_size("1200") == 2  # trailing zeros trimmed: "12"
    assert number_size("0.0012") == 2  # leading zeros trimmed
    assert number_size("-1700000000.125") == 8  # 13 digits: 7 bytes, plus 1
    assert attribute_size({"BOOL": True}) == attribute_size({"NULL": True}) == 1
    assert attribute_size({"L": []}) == attribute_size({"M": {}}) == 3
    # a map: 3, plus each element's name and value and 1 byte each
    assert attribute_size({"M": {"a": {"S": "xy"}, "b": {"N": "1"}}}) == 3 + (1 + 2 + 1) + (
        1 + 2 + 1
    )
    assert item_size({"id": {"S": "k"}, "n": {"N": "7"}}) == (2 + 1) + (1 + 2)


def test_units_round_up_per_4_kb_read_and_1_kb_write() -> None:
    assert read_units(0, consistent=True) == 1  # nothing found is still a read
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(3500, consistent=False) == 0.5
    assert write_units(1) == write_units(1024) == 1
    assert write_units(1025) == 2


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _item(key: str, payload_bytes: int) -> dict[str, Any]:
    return {"id": {"S": key}, "p": {"S": "x" * payload_bytes}}


def test_each_request_is_billed_by_the_larger_item_and_transactions_twice(dynamodb: Any) -> None:
    with metering_request_units() as meter:
        dynamodb.put_item(TableName=TABLE, Item=_item("a", 1500))  # 1505 B: 2 WRU
        dynamodb.update_item(
            TableName=TABLE,
            Key={"id": {"S": "a"}},
            UpdateExpression="SET p = :small",
            ExpressionAttributeValues={":small": {"S": "y"}},
        )  # before 1505 B, after 6 B: the larger, 2 WRU
        dynamodb.get_item(TableName=TABLE, Key={"id": {"S": "a"}}, ConsistentRead=True)
        dynamodb.get_item(TableName=TABLE, Key={"id": {"S": "missing"}})  # eventually: 0.5
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": _item("b", 100)}},
                {"Put": {"TableName": TABLE, "Item": _item("c", 2000)}},
            ]
        )  # (1 + 2) units, twice
        with pytest.raises(ClientError):  # the condition fails: still billed, the new item's size
            dynamodb.put_item(
                TableName=TABLE,
                Item=_item("a", 3000),
                ConditionExpression="attribute_not_exists(id)",
            )
        with pytest.raises(ClientError):  # a refused request (validation) is not billed
            dynamodb.put_item(TableName=TABLE, Item={"nokey": {"S": "x"}})

    billed = [(b.operation, b.read_units, b.write_units) for b in meter.billed]
    assert billed == [
        ("put_item", 0, 2),
        ("update_item", 0, 2),
        ("get_item", 1, 0),
        ("get_item", 0.5, 0),
        ("transact_write_items", 0, 6),
        ("put_item", 0, 3),
        ("put_item", 0, 0),
    ]
    assert (meter.read_units(), meter.write_units()) == (1.5, 13)
    assert meter.unmetered == []


def test_a_cancelled_transaction_is_billed_its_prepare_phase(dynamodb: Any) -> None:
    dynamodb.put_item(TableName=TABLE, Item=_item("a", 10))
    with metering_request_units() as meter, pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": _item("b", 10)}},
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": _item("a", 10),
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                },
            ]
        )
    ((operation, units),) = [(b.operation, b.write_units) for b in meter.billed]
    assert (operation, units) == ("transact_write_items", 2)
    assert meter.billed[0].note == "TransactionCanceledException"


def test_outside_a_meter_nothing_is_recorded(dynamodb: Any) -> None:
    with metering_request_units() as meter:
        pass
    dynamodb.put_item(TableName=TABLE, Item=_item("a", 10))
    assert meter.billed == []
