"""Which TTL values the local AWS treats as expired (DynamoDB's documented rules)."""

from __future__ import annotations

import pytest
from moto.dynamodb.models.dynamo_type import DynamoType

from local_aws.transaction_tokens import canonical_request
from local_aws.ttl import MAX_PAST_SECONDS, ttl_expired

NOW = 1_800_000_000.25


@pytest.mark.parametrize(
    ("value", "expired"),
    [
        ({"N": str(int(NOW) - 1)}, True),
        ({"N": "1800000000.2"}, True),  # fractions count: less than now
        ({"N": "1800000000.25"}, False),  # "less than the current time": equal is not expired
        ({"N": str(int(NOW) + 1)}, False),
        ({"N": str(int(NOW) * 1000)}, False),  # milliseconds: far future, never expires
        ({"N": str(int(NOW - MAX_PAST_SECONDS) + 1)}, True),
        ({"N": str(int(NOW - MAX_PAST_SECONDS) - 1)}, False),  # > five years in the past
        ({"S": str(int(NOW) - 1)}, False),  # not a Number: ignored
        ({"NS": [str(int(NOW) - 1)]}, False),
        ({"L": [{"N": str(int(NOW) - 1)}]}, False),
    ],
)
def test_ttl_rules(value: dict[str, object], expired: bool) -> None:
    assert ttl_expired(DynamoType(value), NOW) is expired


def test_an_item_without_the_attribute_never_expires() -> None:
    assert ttl_expired(None, NOW) is False


def test_the_token_identity_ignores_key_order_and_the_token_only() -> None:
    item = {"pk": {"S": "a"}, "n": {"N": "1"}}
    reordered = {"n": {"N": "1"}, "pk": {"S": "a"}}
    first = {
        "TransactItems": [{"Put": {"TableName": "t", "Item": item}}],
        "ClientRequestToken": "x",
    }
    same = {
        "ClientRequestToken": "y",
        "TransactItems": [{"Put": {"Item": reordered, "TableName": "t"}}],
    }

    assert canonical_request(first) == canonical_request(same)
    assert canonical_request(first) != canonical_request(
        {**first, "ReturnConsumedCapacity": "TOTAL"}
    )
    swapped = {"TransactItems": [{"Put": {"TableName": "t", "Item": {**item, "n": {"N": "2"}}}}]}
    assert canonical_request(first) != canonical_request(swapped)
    assert canonical_request({"B": b"\x00\x01"}) != canonical_request({"B": b"\x00\x02"})
