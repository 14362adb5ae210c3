"""Chained redrives whose deliveries never reach the ledger (found by an adversarial review):
the record expires under them and DynamoDB deletes it; the next redrive must still find what
happened instead of refunding or reserving a second time.

The retention rule ("every delivery renews `expires_at`, so chained redrives never meet a record
that expired under them", docs/design.md §3, stacks/config.py `_check_retention_outlasts_redrives`)
only holds for deliveries that write the ledger. A delivery that fails before its first ledger
write renews nothing: Lambda throttling (`Lambda.TooManyRequestsException`, e.g. reserved
concurrency set to 0 while the payment provider has an incident), an unreachable ledger table
(TransientError from the claim), a broken deploy (import/configuration error). Each redrive is
allowed within 14 days of the previous close, so two failed redrives take the case past the
ledger's 30-day retention; DynamoDB's TTL deletes the record; the payment provider forgot the
idempotency key after 24 h; the next redrive's delivery finds no record, claims, and refunds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import saga.handlers.issue_refund as issue_refund_module
import saga.handlers.reserve_stock as reserve_module
from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from saga.identity import Operation
from tests.e2e.test_no_second_effect import variant
from tests.e2e.test_saga_paths import Saga

DAY = 86400


class Throttled(Exception):
    """What Step Functions reports when Lambda refuses the invoke (reserved concurrency 0)."""


class ServiceError(Exception):
    """A Lambda service error on the invoke's answer: the function ran, the answer is lost."""


# The local runtime reports the class name as the error type, as Step Functions would name them.
Throttled.__name__ = "Lambda.TooManyRequestsException"
ServiceError.__name__ = "Lambda.ServiceException"


class AnswerLostThenThrottled:
    """A tool's handler in Lambda: the first delivery runs, but its answer to Step Functions is
    lost (a retryable invoke-level error); every later invoke is refused until `throttled` is
    lifted."""

    def __init__(self, handler: Callable[[Any, Any], Any]) -> None:
        self.handler = handler
        self.calls = 0
        self.throttled = True

    def __call__(self, event: Any, context: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.handler(event, context)
            raise ServiceError("Service error.")
        if self.throttled:
            raise Throttled("Rate Exceeded.")
        return self.handler(event, context)


@pytest.mark.usefixtures("handlers_in_this_process")  # the patched handler
def test_a_refund_is_not_made_twice_after_chained_redrives_that_never_reached_the_ledger(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first delivery refunds and records COMPLETED; its answer is lost, then throttled.
    refund_handler = AnswerLostThenThrottled(issue_refund_module.handler)
    monkeypatch.setattr(issue_refund_module, "handler", refund_handler)

    saga = Saga(local_aws, variant("happy-path", "case-r1"))
    assert saga.status == "FAILED", saga.path  # IssueRefund's retries ran out
    assert saga.count_effects("PaymentsTableName") == 1
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["status"]["S"] == "COMPLETED"

    for _ in range(2):  # each redrive within 14 days of the previous close; still throttled
        local_aws.clock.advance(13 * DAY)
        saga.redrive()
        assert saga.status == "FAILED"

    deleted = local_aws.clock.advance(13 * DAY).effects["ttl_deleted"]  # day 39
    assert deleted.get(local_aws.outputs["LedgerTableName"], 0) >= 1
    assert saga.ledger(Operation.REFUND) is None  # last written on day 0: TTL deleted it
    refund_handler.throttled = False
    saga.redrive()  # within 14 days of the last close
    assert (saga.status, saga.output["outcome"]) == ("SUCCEEDED", "COMPLETED")

    # The promise: one approved refund, one refund, whatever failed.
    assert saga.count_effects("PaymentsTableName") == 1, (
        f"refunds made: {saga.count_effects('PaymentsTableName')}; "
        f"execution {saga.status}, path {saga.path[-6:]}"
    )


@pytest.mark.usefixtures("handlers_in_this_process")  # the patched handler
def test_a_reservation_whose_record_expired_under_chained_redrives_is_not_reported_as_nothing(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same chain on ReserveStock: the reservation committed on day 0 (stock taken, the
    reservation item HELD; that table has no TTL), the ledger record is TTL-deleted by day 39,
    and by then the SKU has no stock left (other cases took it). The redriven delivery's
    transaction is cancelled by the stock condition first, so the case escalates OUT_OF_STOCK
    with "Nothing was reserved, refunded or shipped" while this case's reservation still holds
    a unit that nothing will ever release."""
    reserve_handler = AnswerLostThenThrottled(reserve_module.handler)
    monkeypatch.setattr(reserve_module, "handler", reserve_handler)
    case = variant("happy-path", "case-r1b")
    case["reserve"]["sku"] = "SKU-BLUE-MUG"
    case = sign_locally(case)
    saga = Saga(local_aws, case)
    assert saga.status == "FAILED", saga.path
    assert saga.available("SKU-BLUE-MUG") == 4  # reserved one of five

    for _ in range(2):
        local_aws.clock.advance(13 * DAY)
        saga.redrive()
        assert saga.status == "FAILED"
    local_aws.clock.advance(13 * DAY)
    assert saga.ledger(Operation.RESERVE) is None  # TTL-deleted; the reservation item is not
    local_aws.client("dynamodb").update_item(  # other cases took the remaining units
        TableName=local_aws.outputs["InventoryTableName"],
        Key={"sku": {"S": "SKU-BLUE-MUG"}},
        UpdateExpression="SET available = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    reserve_handler.throttled = False
    saga.redrive()

    assert saga.status == "SUCCEEDED"
    escalation = saga.output["escalation"] or {}
    reservations = local_aws.client("dynamodb").scan(
        TableName=local_aws.outputs["ReservationsTableName"], ConsistentRead=True
    )["Items"]
    held = [r for r in reservations if r["case_id"]["S"] == "case-r1b"]
    assert [r["status"]["S"] for r in held] == ["HELD"]  # this case still holds a unit
    # An honest outcome does not tell the person that nothing was reserved.
    assert "Nothing was reserved" not in str(escalation.get("decision_needed")), escalation
