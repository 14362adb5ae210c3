"""The TransactWriteItems token names exactly one request body (docs/design.md §3.9).

DynamoDB answers a token it saw in the last 10 minutes with the first request's result when the
body is the same, and with IdempotentParameterMismatchException when it is not: so the token must
change with anything in the body (another attempt at the same action, another case's record),
and must not change when nothing in the body does.
"""

from __future__ import annotations

from typing import Any

from saga.dynamodb import TransactWriteItem, client_request_token
from saga.identity import Operation, action_id_for, request_digest
from saga.ledger import ActionRequest, Attempt, LedgerRecord, LedgerStatus
from saga.ledger.items import put_condition, record_item

NOW = 1_700_000_000.0
REQUEST = ActionRequest(
    tenant_id="acme",
    operation=Operation.RESERVE.value,
    action_id=action_id_for("case-0001", Operation.RESERVE),
    digest=request_digest({"sku": "SKU-RED-MUG", "quantity": 1}, 1),
    case_id="case-0001",
)
STOCK: TransactWriteItem = {
    "Update": {
        "TableName": "inventory",
        "Key": {"sku": {"S": "SKU-RED-MUG"}},
        "UpdateExpression": "SET available = available - :q",
        "ConditionExpression": "available >= :q",
        "ExpressionAttributeValues": {":q": {"N": "1"}},
    }
}


def ledger_put(attempt_id: str, now: float, over: LedgerRecord | None = None) -> TransactWriteItem:
    """The ledger's Put of the reserve's COMPLETED record, as NativeEffects sends it."""
    item = record_item(
        REQUEST,
        Attempt(attempt_id, 30),
        now,
        expires_at=int(now) + 7 * 86400,
        status=LedgerStatus.COMPLETED,
        attempts=1 if over is None else over.attempts + 1,
        carried=over,
    )
    put: dict[str, Any] = {"TableName": "ledger", "Item": item, **put_condition(over)}
    return {"Put": put}  # type: ignore[typeddict-item]


def case_completion(case_id: str) -> TransactWriteItem:
    """An Update-led transaction: a case record's COMPLETED (as CreateShipment's companion)."""
    return {
        "Update": {
            "TableName": "cases",
            "Key": {"case_id": {"S": case_id}},
            "UpdateExpression": "SET outcome = :done",
            "ConditionExpression": "outcome = :open",
            "ExpressionAttributeValues": {
                ":done": {"S": "COMPLETED"},
                ":open": {"S": "IN_PROGRESS"},
            },
        }
    }


def test_the_same_body_has_the_same_token_whatever_the_order_of_its_keys() -> None:
    body = [ledger_put("a1", NOW), STOCK]
    token = client_request_token(body)
    reordered = [{"Put": dict(reversed(list(body[0]["Put"].items())))}, STOCK]

    assert client_request_token(reordered) == token  # type: ignore[arg-type]
    assert len(token) <= 36  # DynamoDB's limit


def test_another_attempt_at_the_same_action_gets_another_token() -> None:
    """The same action key, another body: another delivery (owner, lease, time), or a takeover
    of the record the first one found: within 10 minutes the first token would be refused."""
    first = [ledger_put("a1", NOW), STOCK]
    retried = [ledger_put("a2", NOW + 5), STOCK]
    placeholder = LedgerRecord.from_item(
        record_item(
            REQUEST,
            Attempt("reconcile-1", 10),
            NOW,
            expires_at=None,
            status=LedgerStatus.UNKNOWN,
            attempts=0,
            owner=False,
        )
    )
    takeover = [ledger_put("a1", NOW, over=placeholder), STOCK]

    tokens = {client_request_token(body) for body in (first, retried, takeover)}
    assert len(tokens) == 3


def test_transactions_led_by_an_update_get_tokens_of_their_own() -> None:
    """A resolution or a shipment's completion starts with an Update (no Put item, no action
    key in the first place): two cases' transactions must not share a token."""
    one = [case_completion("case-0001"), STOCK]
    other = [case_completion("case-0002"), STOCK]

    assert client_request_token(one) != client_request_token(other)
    assert client_request_token(one) == client_request_token([case_completion("case-0001"), STOCK])
