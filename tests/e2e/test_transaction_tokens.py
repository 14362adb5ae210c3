"""DynamoDB's ClientRequestToken contract for TransactWriteItems, as the local AWS enforces it.

Through boto3 against the local AWS, like the handlers: within 10 minutes (on the local clock)
the same token with the same request succeeds without applying it again; the same token with any
other request is IdempotentParameterMismatchException; after 10 minutes the token is forgotten.
The last test shows the ledger's own transaction (ReserveStock) runs under the contract in the
real state machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.emulator import LOCAL_ACCOUNT_ID
from local_aws.environment import LocalAws
from local_aws.transaction_tokens import (
    MISMATCH_MESSAGE,
    TOKEN_WINDOW_SECONDS,
    remembered_requests,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOKEN = "token-0123456789abcdef0123456789abcd"  # 35 characters


def _add(local: LocalAws, key: str, amount: int = 1) -> dict[str, Any]:
    """One transaction: add `amount` to the counter of ledger item `key` (not idempotent)."""
    return {
        "Update": {
            "TableName": local.outputs["LedgerTableName"],
            "Key": {"action_key": {"S": key}},
            "UpdateExpression": "ADD #count :n",
            "ExpressionAttributeNames": {"#count": "count"},
            "ExpressionAttributeValues": {":n": {"N": str(amount)}},
        }
    }


def _count(local: LocalAws, key: str) -> int:
    item = (
        local.client("dynamodb")
        .get_item(TableName=local.outputs["LedgerTableName"], Key={"action_key": {"S": key}})
        .get("Item")
    )
    return int(item["count"]["N"]) if item else 0


def _error(call: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        call()
    return dict(raised.value.response)


def test_the_same_request_under_the_same_token_applies_once(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    ddb = local.client("dynamodb")

    for _ in range(3):
        ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)
    local.clock.advance(TOKEN_WINDOW_SECONDS - 1)
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)

    assert _count(local, "a") == 1
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken="other-token")
    assert _count(local, "a") == 2  # another token is another request


def test_another_request_under_a_used_token_is_a_mismatch(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)

    variants: list[dict[str, Any]] = [
        {"TransactItems": [_add(local, "a", amount=2)]},  # other values
        {"TransactItems": [_add(local, "b")]},  # another item
        {"TransactItems": [_add(local, "a"), _add(local, "b")]},  # more items
        {"TransactItems": [_add(local, "a")], "ReturnConsumedCapacity": "TOTAL"},  # a parameter
    ]
    for variant in variants:
        response = _error(lambda v=variant: ddb.transact_write_items(ClientRequestToken=TOKEN, **v))
        assert response["Error"]["Code"] == "IdempotentParameterMismatchException"
        assert response["Error"]["Message"] == MISMATCH_MESSAGE
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 400

    assert (_count(local, "a"), _count(local, "b")) == (1, 0)


def test_key_order_does_not_make_another_request(fixture_local_aws: LocalAws) -> None:
    """AWS compares the parameters, not the bytes: the order of an item's attributes is no
    change (LocalStack recorded this against AWS)."""
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    table = local.outputs["LedgerTableName"]
    item = {"action_key": {"S": "k"}, "note": {"S": "first"}}

    ddb.transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": item}}], ClientRequestToken=TOKEN
    )
    ddb.put_item(TableName=table, Item={"action_key": {"S": "k"}, "note": {"S": "changed"}})
    ddb.transact_write_items(
        TransactItems=[{"Put": {"Item": dict(reversed(item.items())), "TableName": table}}],
        ClientRequestToken=TOKEN,
    )

    stored = ddb.get_item(TableName=table, Key={"action_key": {"S": "k"}})["Item"]
    assert stored["note"]["S"] == "changed"  # the replay wrote nothing


def test_after_ten_minutes_the_token_is_forgotten(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)
    local.clock.advance(TOKEN_WINDOW_SECONDS / 2)
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)

    # The window counts from the first request's completion; a replay does not extend it.
    local.clock.advance(TOKEN_WINDOW_SECONDS / 2)
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)
    assert _count(local, "a") == 2

    # ... and the new request opened a new window, for its own parameters.
    response = _error(
        lambda: ddb.transact_write_items(
            TransactItems=[_add(local, "a", amount=5)], ClientRequestToken=TOKEN
        )
    )
    assert response["Error"]["Code"] == "IdempotentParameterMismatchException"
    local.clock.advance(TOKEN_WINDOW_SECONDS)
    ddb.transact_write_items(TransactItems=[_add(local, "a", amount=5)], ClientRequestToken=TOKEN)
    assert _count(local, "a") == 7


def test_a_cancelled_request_binds_its_token_too(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    table = local.outputs["LedgerTableName"]
    ddb.put_item(TableName=table, Item={"action_key": {"S": "taken"}})
    guarded_put = {
        "Put": {
            "TableName": table,
            "Item": {"action_key": {"S": "taken"}, "owner": {"S": "me"}},
            "ConditionExpression": "attribute_not_exists(action_key)",
        }
    }

    def send(*items: dict[str, Any]) -> None:
        ddb.transact_write_items(TransactItems=list(items), ClientRequestToken=TOKEN)

    first = _error(lambda: send(guarded_put, _add(local, "a")))
    assert first["Error"]["Code"] == "TransactionCanceledException"
    ddb.delete_item(TableName=table, Key={"action_key": {"S": "taken"}})

    # The same request again: the same cancellation, nothing applied (the condition now holds).
    again = _error(lambda: send(guarded_put, _add(local, "a")))
    assert again["Error"]["Code"] == "TransactionCanceledException"
    assert again["CancellationReasons"] == first["CancellationReasons"]
    assert _count(local, "a") == 0
    # Another request under that token: the mismatch (issue 9, item 5 is this case).
    other = _error(lambda: send(_add(local, "a")))
    assert other["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert _count(local, "a") == 0


def test_a_request_refused_before_it_ran_binds_nothing(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    missing = {**_add(local, "a")["Update"], "TableName": "no-such-table"}

    refused = _error(
        lambda: ddb.transact_write_items(
            TransactItems=[{"Update": missing}], ClientRequestToken=TOKEN
        )
    )
    assert refused["Error"]["Code"] == "ResourceNotFoundException"
    ddb.transact_write_items(TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN)

    assert _count(local, "a") == 1


def test_a_token_longer_than_36_characters_is_invalid(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    response = _error(
        lambda: local.client("dynamodb").transact_write_items(
            TransactItems=[_add(local, "a")], ClientRequestToken="x" * 37
        )
    )
    assert response["Error"]["Code"] == "ValidationException"
    assert "Member must have length less than or equal to 36" in response["Error"]["Message"]
    assert _count(local, "a") == 0


def test_a_fresh_account_forgets_every_token(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    local.client("dynamodb").transact_write_items(
        TransactItems=[_add(local, "a")], ClientRequestToken=TOKEN
    )

    local.reprovision()
    local.client("dynamodb").transact_write_items(
        TransactItems=[_add(local, "a", amount=3)], ClientRequestToken=TOKEN
    )

    assert _count(local, "a") == 3


# -- the ledger's transaction in the real state machine ---------------------------------------


def _reserve_transaction(local: LocalAws) -> tuple[str, dict[str, Any]]:
    """The saga's one TransactWriteItems on the stock (ReserveStock: ledger record + stock +
    reservation), as the local AWS remembers it under its token."""
    from moto.dynamodb.models import dynamodb_backends

    def tables(parameters: dict[str, Any]) -> list[str]:
        return [next(iter(item.values()))["TableName"] for item in parameters["TransactItems"]]

    backend = dynamodb_backends[LOCAL_ACCOUNT_ID][local.server.region]
    on_stock = [
        first
        for first in remembered_requests(backend).values()
        if local.outputs["InventoryTableName"] in tables(first.parameters)
    ]
    assert len(on_stock) == 1, [first.token for first in on_stock]
    first = on_stock[0]
    assert tables(first.parameters)[0] == local.outputs["LedgerTableName"]
    assert first.committed
    return first.token, first.parameters


def _available(local: LocalAws, sku: str) -> int:
    item = local.client("dynamodb").get_item(
        TableName=local.outputs["InventoryTableName"], Key={"sku": {"S": sku}}
    )["Item"]
    return int(item["available"]["N"])


def test_the_ledgers_reserve_transaction_runs_under_the_contract(local_aws: LocalAws) -> None:
    case = json.loads((EXAMPLES / "happy-path.json").read_text(encoding="utf-8"))
    sku = case["reserve"]["sku"]
    before = _available(local_aws, sku)
    description, _ = local_aws.run_case(case)
    assert description["status"] == "SUCCEEDED"
    assert _available(local_aws, sku) == before - case["reserve"]["quantity"]
    token, parameters = _reserve_transaction(local_aws)
    ddb = local_aws.client("dynamodb")
    request = {name: value for name, value in parameters.items() if name != "ClientRequestToken"}

    # The SDK retrying the very request the handler sent: success, no second reservation.
    ddb.transact_write_items(ClientRequestToken=token, **request)
    assert _available(local_aws, sku) == before - case["reserve"]["quantity"]
    # The token sent with other items (what issue 9, item 5 describes): refused, as on AWS.
    altered = json.loads(json.dumps(request).replace('"COMPLETED"', '"IN_PROGRESS"', 1))
    assert altered != request
    response = _error(lambda: ddb.transact_write_items(ClientRequestToken=token, **altered))
    assert response["Error"]["Code"] == "IdempotentParameterMismatchException"
    # Ten minutes later the token is forgotten: the request runs again, and only the ledger's
    # own condition (the record exists) stops a second reservation.
    local_aws.clock.advance(TOKEN_WINDOW_SECONDS)
    late = _error(lambda: ddb.transact_write_items(ClientRequestToken=token, **request))
    assert late["Error"]["Code"] == "TransactionCanceledException"
    assert late["CancellationReasons"][0]["Code"] == "ConditionalCheckFailed"
    assert _available(local_aws, sku) == before - case["reserve"]["quantity"]
