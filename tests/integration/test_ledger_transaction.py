"""The single-transaction path: ledger record + effect items in one TransactWriteItems.

The effect here is a real stock decrement and reservation item in moto tables, so "one effect"
means the stock went down once and one reservation exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from local_aws.clock import LocalClock
from local_aws.tables import StackTables
from local_aws.transaction_tokens import TOKEN_WINDOW_SECONDS
from saga.errors import (
    ActionPending,
    KeyConflict,
    OutOfStock,
    SagaError,
    TransientError,
)
from saga.identity import Operation, action_id_for, request_digest
from saga.ledger import Absent, ActionLedger, ActionRequest, Attempt, LedgerStatus
from saga_bench.metering import RequestCounter
from tests.integration.ledger_harness import FakeClock, lose_responses

INVENTORY = "inventory-test"
RESERVATIONS = "reservations-test"


@pytest.fixture
def stock(dynamodb: Any, admin_dynamodb: Any, ledger_table: str, stack_tables: StackTables) -> Any:
    stack_tables.create(
        admin_dynamodb, {"InventoryTableName": INVENTORY, "ReservationsTableName": RESERVATIONS}
    )
    dynamodb.put_item(
        TableName=INVENTORY, Item={"sku": {"S": "SKU-RED-MUG"}, "available": {"N": "3"}}
    )

    def available() -> int:
        item = dynamodb.get_item(TableName=INVENTORY, Key={"sku": {"S": "SKU-RED-MUG"}})["Item"]
        return int(item["available"]["N"])

    return available


def reserve_request(quantity: int = 1, case_id: str = "case-0001") -> ActionRequest:
    parameters = {"sku": "SKU-RED-MUG", "quantity": quantity}
    return ActionRequest(
        tenant_id="acme",
        operation=Operation.RESERVE.value,
        action_id=action_id_for(case_id, Operation.RESERVE),
        digest=request_digest(parameters, 1),
        case_id=case_id,
    )


def reserve(ledger: ActionLedger, request: ActionRequest, attempt_id: str, quantity: int) -> Any:
    items: list[Any] = [
        {
            "Update": {
                "TableName": INVENTORY,
                "Key": {"sku": {"S": "SKU-RED-MUG"}},
                "UpdateExpression": "SET available = available - :q",
                "ConditionExpression": "available >= :q",
                "ExpressionAttributeValues": {":q": {"N": str(quantity)}},
            }
        },
        {
            "Put": {
                "TableName": RESERVATIONS,
                "Item": {
                    "reservation_id": {"S": request.key},
                    "quantity": {"N": str(quantity)},
                },
                "ConditionExpression": "attribute_not_exists(reservation_id)",
            }
        },
    ]

    def explain(failed: Mapping[int, dict[str, Any]]) -> SagaError:
        if 1 in failed:
            return TransientError(f"reservation item 1 exists: {failed[1].get('Code')}")
        return OutOfStock(f"not enough SKU-RED-MUG for {quantity}")

    return ledger.execute_transaction(
        request,
        Attempt(attempt_id, 30),
        effect_items=items,
        result={"reservation_id": request.key, "quantity": quantity},
        downstream_ref=request.key,
        explain_failure=explain,
    )


def test_native_effect_commits_ledger_and_effect_in_one_transaction_write(
    ledger: ActionLedger, stock: Any, request_counter: RequestCounter
) -> None:
    request = reserve_request()
    with request_counter.measure() as calls:
        outcome = reserve(ledger, request, "a1", 1)

    assert dict(calls) == {"TransactWriteItems": 1}
    assert stock() == 2
    assert outcome.result == {"reservation_id": request.key, "quantity": 1}
    assert (outcome.replayed, outcome.attempts) == (False, 1)
    record = ledger.get(request.key)
    assert record is not None and record.status is LedgerStatus.COMPLETED


def test_native_replay_is_decided_from_the_cancellation_reason_with_one_request(
    ledger: ActionLedger, stock: Any, request_counter: RequestCounter
) -> None:
    request = reserve_request()
    first = reserve(ledger, request, "a1", 1)

    with request_counter.measure() as calls:
        again = reserve(ledger, request, "a2", 1)

    assert dict(calls) == {"TransactWriteItems": 1}  # no follow-up read
    assert stock() == 2
    assert again.replayed and again.result == first.result


def test_lost_transaction_response_retried_by_the_sdk_is_answered_by_the_token(
    ledger: ActionLedger, stock: Any, dynamodb: Any
) -> None:
    """Within 10 minutes DynamoDB answers the SDK's retry of the same request from its
    ClientRequestToken (the local AWS enforces the contract): success, nothing applied again."""
    with lose_responses(dynamodb, "TransactWriteItems") as lost:
        outcome = reserve(ledger, reserve_request(), "a1", 1)

    assert lost == [1]
    assert stock() == 2
    assert (outcome.status, outcome.replayed, outcome.attempts) == ("COMPLETED", False, 1)


def test_lost_transaction_response_retried_after_the_token_window_is_a_replay(
    ledger: ActionLedger, stock: Any, dynamodb: Any, clock: FakeClock, local_clock: LocalClock
) -> None:
    """Past the token's 10 minutes the retry is a new request: the ledger condition alone must
    catch the repeat, as it does for any replay after the window."""
    clock.now = local_clock.now()  # one time for the ledger and DynamoDB (token window, TTL)

    def ten_minutes_pass(**_: Any) -> None:
        local_clock.advance(TOKEN_WINDOW_SECONDS)
        clock.advance(TOKEN_WINDOW_SECONDS)

    retry_event = "needs-retry.dynamodb.TransactWriteItems"
    dynamodb.meta.events.register(retry_event, ten_minutes_pass)
    try:  # the client is shared for the process's life (as in a Lambda container)
        with lose_responses(dynamodb, "TransactWriteItems") as lost:
            outcome = reserve(ledger, reserve_request(), "a1", 1)
    finally:
        dynamodb.meta.events.unregister(retry_event, ten_minutes_pass)

    assert lost == [1]
    assert stock() == 2
    assert outcome.replayed


def test_native_changed_parameters_conflict_and_leave_stock_alone(
    ledger: ActionLedger, stock: Any
) -> None:
    reserve(ledger, reserve_request(quantity=1), "a1", 1)
    with pytest.raises(KeyConflict):
        reserve(ledger, reserve_request(quantity=2), "a2", 2)
    assert stock() == 2


def test_native_business_failure_is_recorded_failed_and_replayed(
    ledger: ActionLedger, stock: Any, request_counter: RequestCounter
) -> None:
    request = reserve_request(quantity=5)
    with pytest.raises(OutOfStock, match="not enough SKU-RED-MUG for 5"):
        reserve(ledger, request, "a1", 5)
    record = ledger.get(request.key)
    assert record is not None and record.status is LedgerStatus.FAILED
    assert record.error == {"type": "OutOfStock", "message": "not enough SKU-RED-MUG for 5"}

    with request_counter.measure() as calls, pytest.raises(OutOfStock):
        reserve(ledger, request, "a2", 5)
    assert dict(calls) == {"TransactWriteItems": 1}
    assert stock() == 3


def test_native_late_replay_returns_the_record_and_reserves_nothing(
    ledger: ActionLedger, stock: Any, clock: FakeClock
) -> None:
    request = reserve_request()
    first = reserve(ledger, request, "a1", 1)
    clock.advance(7 * 86400 + 1)  # past the retention; TTL has not deleted it yet
    late = reserve(ledger, request, "a2", 1)
    assert late.replayed and late.result == first.result
    assert stock() == 2


def test_record_failure_writes_failed_once_and_replays_a_completed_action(
    ledger: ActionLedger, stock: Any
) -> None:
    rejected = reserve_request(case_id="case-rejected")
    with pytest.raises(OutOfStock, match="sandbox reject"):
        ledger.record_failure(rejected, Attempt("a1", 30), OutOfStock("sandbox reject"))
    with pytest.raises(OutOfStock, match="sandbox reject"):  # the recorded one, not a new write
        ledger.record_failure(rejected, Attempt("a2", 30), OutOfStock("another reason"))
    record = ledger.get(rejected.key)
    assert record is not None and record.error == {
        "type": "OutOfStock",
        "message": "sandbox reject",
    }

    done = reserve_request(case_id="case-done")
    committed = reserve(ledger, done, "b1", 1)
    outcome = ledger.record_failure(done, Attempt("b2", 30), OutOfStock("late reject"))
    assert outcome.replayed and outcome.result == committed.result


def test_one_delivery_never_sends_one_token_with_two_bodies(
    ledger: ActionLedger, dynamodb: Any, stock: Any
) -> None:
    """Taking over a record with attempts = 0 (the reconcile tool's placeholder after "not
    found") makes the delivery send a second, different transaction: on DynamoDB a token reused
    with another body is IdempotentParameterMismatch, so each body must carry its own token."""
    sent: list[tuple[str, str]] = []

    def remember(params: dict[str, Any], **_: Any) -> None:
        sent.append((params["ClientRequestToken"], json.dumps(params["TransactItems"])))

    request = reserve_request()
    placeholder = ledger.reconcile(request, Attempt("reconcile-1", 10), reconcile=Absent)
    assert placeholder.decision == "RETRY"
    event = "provide-client-params.dynamodb.TransactWriteItems"
    dynamodb.meta.events.register(event, remember)  # the client is shared: unregister below
    try:
        outcome = reserve(ledger, request, "delivery-1", 1)
    finally:
        dynamodb.meta.events.unregister(event, remember)

    assert outcome.status == "COMPLETED" and stock() == 2
    assert len(sent) == 2  # the first put failed on the placeholder, the takeover put won
    bodies_by_token: dict[str, set[str]] = {}
    for token, body in sent:
        bodies_by_token.setdefault(token, set()).add(body)
    assert all(len(bodies) == 1 for bodies in bodies_by_token.values()), bodies_by_token
    assert len(bodies_by_token) == 2


def test_native_open_record_of_another_attempt_is_pending(ledger: ActionLedger, stock: Any) -> None:
    """A native action whose key is held IN_PROGRESS (not written by this path) is not run."""
    request = reserve_request()
    ledger.store.claim(request, Attempt("external", 30))
    with pytest.raises(ActionPending):
        reserve(ledger, request, "a2", 1)
    assert stock() == 3
