"""DynamoDB request units as AWS bills them (local_aws/request_units.py), on moto's tables:
the item-size rules with AWS's own examples, and each kind of request the code makes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from local_aws.request_units import (
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


# --- secondary indexes -------------------------------------------------------------------------
# The DynamoDB Developer Guide, "Provisioned throughput considerations for Global Secondary
# Indexes", Write capacity units
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes):
# the quotes in each test are from there.
INDEXED = "indexed"


@pytest.fixture
def indexed(dynamodb: Any) -> Any:
    """The ledger's shape: a sparse index `open` (pk `open_status`, sk `lease`, projection ALL)
    and a KEYS_ONLY one (`by_owner`) on the same table."""
    dynamodb.create_table(
        TableName=INDEXED,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": kind}
            for name, kind in (("id", "S"), ("open_status", "S"), ("lease", "N"), ("owner", "S"))
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "open",
                "KeySchema": [
                    {"AttributeName": "open_status", "KeyType": "HASH"},
                    {"AttributeName": "lease", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_owner",
                "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return dynamodb


def _update(client: Any, key: str, expression: str, **values: Any) -> None:
    params: dict[str, Any] = {"ExpressionAttributeValues": {f":{n}": v for n, v in values.items()}}
    client.update_item(
        TableName=INDEXED,
        Key={"id": {"S": key}},
        UpdateExpression=expression,
        **(params if values else {}),
    )


def _writes(meter: Any) -> list[tuple[str, str, str, int]]:
    return [(b.operation, w.index, w.kind, w.units) for b in meter.billed for w in b.index_writes]


def test_an_item_entering_moving_in_and_leaving_a_sparse_index_is_billed_there(
    indexed: Any,
) -> None:
    """ "If you write a new item to the table that defines an indexed attribute [...] one write
    operation is required to put the item into the index"; "If an update to the table changes
    the value of an indexed key attribute (from A to B), two writes are required"; "If an
    update to the table only changes the value of projected attributes [...] one write is
    required"; "If an item was present in the index, but a write to the table caused the
    indexed attribute to be deleted, one write is required to delete the old item projection";
    "If an item is not present in the index before or after the item is updated, there is no
    additional write cost for the index"."""
    open_item = {
        "id": {"S": "a"},
        "open_status": {"S": "IN_PROGRESS"},
        "lease": {"N": "100"},
        "p": {"S": "x"},
    }
    with metering_request_units() as meter:
        indexed.put_item(TableName=INDEXED, Item=open_item)  # put into `open`
        _update(indexed, "a", "SET p = :p", p={"S": "y"})  # a projected attribute: update
        _update(indexed, "a", "SET lease = :l", l={"N": "200"})  # its index key: delete + put
        _update(indexed, "a", "REMOVE open_status")  # leaves `open`: delete
        _update(indexed, "a", "SET p = :p", p={"S": "z"})  # in no index: nothing
        indexed.put_item(TableName=INDEXED, Item={"id": {"S": "b"}})  # in no index: nothing
    assert _writes(meter) == [
        ("put_item", "open", "put", 1),
        ("update_item", "open", "update", 1),
        ("update_item", "open", "key change", 2),
        ("update_item", "open", "delete", 1),
    ]
    # The tables' own units apart: 6 writes of small items, 1 each.
    assert (meter.write_units(), meter.index_write_units()) == (6, 5)
    assert meter.index_write_units({INDEXED}) == 5 and meter.index_write_units({"other"}) == 0


def test_an_index_entry_is_billed_by_its_own_size_as_projected(indexed: Any) -> None:
    """ "All of these factors assume that the size of each item in the index is less than or
    equal to the 1 KB item size for calculating write capacity units. Larger index entries will
    require additional write capacity units": ALL projects the 3 KB payload (3 units), KEYS_ONLY
    only the keys (1 unit); a change outside a KEYS_ONLY projection leaves its entry as it was,
    and "if a write to a table does not require a global secondary index update, then no write
    capacity is consumed from the index"."""
    big = {
        "id": {"S": "a"},
        "open_status": {"S": "IN_PROGRESS"},
        "lease": {"N": "100"},
        "owner": {"S": "me"},
        "p": {"S": "x" * 3000},
    }
    with metering_request_units() as meter:
        indexed.put_item(TableName=INDEXED, Item=big)
        _update(indexed, "a", "SET p = :p", p={"S": "y"})  # shrinks: the larger entry counts
        indexed.delete_item(TableName=INDEXED, Key={"id": {"S": "a"}})
    assert _writes(meter) == [
        ("put_item", "open", "put", 3),
        ("put_item", "by_owner", "put", 1),
        ("update_item", "open", "update", 3),
        ("delete_item", "open", "delete", 1),
        ("delete_item", "by_owner", "delete", 1),
    ]


def test_a_transactions_index_writes_are_billed_twice_a_failed_condition_none(
    indexed: Any,
) -> None:
    """Every item of a transaction is billed twice ("one to prepare the transaction and one to
    commit the transaction"); the guide says of indexes only that "changes made with
    transactions are propagated to global secondary indexes (GSIs) [...] after the transaction
    completes successfully", not how often that is billed: twice, the costlier reading. A
    ConditionCheck changes no entry; a write whose condition failed, or a cancelled
    transaction, changes none either."""
    indexed.put_item(
        TableName=INDEXED,
        Item={"id": {"S": "c"}, "open_status": {"S": "IN_PROGRESS"}, "lease": {"N": "1"}},
    )
    with metering_request_units() as meter:
        indexed.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": INDEXED,
                        "Key": {"id": {"S": "c"}},
                        "UpdateExpression": "REMOVE open_status",
                    }
                },
                {
                    "Put": {
                        "TableName": INDEXED,
                        "Item": {
                            "id": {"S": "d"},
                            "open_status": {"S": "UNKNOWN"},
                            "lease": {"N": "2"},
                        },
                    }
                },
            ]
        )
        indexed.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": INDEXED,
                        "Key": {"id": {"S": "d"}},
                        "ConditionExpression": "attribute_exists(id)",
                    }
                },
                {"Put": {"TableName": INDEXED, "Item": {"id": {"S": "e"}}}},
            ]
        )
        with pytest.raises(ClientError):
            indexed.put_item(
                TableName=INDEXED,
                Item={"id": {"S": "d"}, "open_status": {"S": "X"}, "lease": {"N": "3"}},
                ConditionExpression="attribute_not_exists(id)",
            )
        with pytest.raises(ClientError):
            indexed.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": INDEXED,
                            "Key": {"id": {"S": "d"}},
                            "UpdateExpression": "REMOVE open_status",
                            "ConditionExpression": "attribute_not_exists(id)",
                        }
                    }
                ]
            )
    assert _writes(meter) == [
        ("transact_write_items", "open", "delete", 2),
        ("transact_write_items", "open", "put", 2),
    ]
    assert [b.index_write_units for b in meter.billed] == [4, 0, 0, 0]
