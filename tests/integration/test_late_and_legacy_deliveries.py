"""Two interleavings found by an adversarial review, at tool level: a delivery that claims only
after reconciliation escalated, and a ledger record written by the tree before deliveries
recorded what they may have sent."""

from __future__ import annotations

from typing import Any

import pytest

from local_aws.tables import StackTables
from local_aws.ttl import delete_expired_items
from saga.cases import OwningExecution
from saga.errors import OutcomeUnknown, TransientError
from saga.identity import Operation, action_request
from saga.models import approval_digest
from saga.ports import DownstreamConflict
from saga.ports.payments import RefundRequest
from saga.tools.reconcile import reconcile_action
from saga.tools.refund import reconcile_refund
from tests.tools_harness import EXECUTION, Delivery, make_case, tools_env


def test_no_delivery_dispatches_an_action_after_it_was_escalated_as_uncertain(
    stack_tables: StackTables,
) -> None:
    """R2: a forward delivery whose claim lands after ReconcileStep escalated still dispatches.

    On AWS the IssueRefund task times out at 25 s (`lambda_task_timeout_seconds`) while its Lambda
    may run until 30 s (`functions.timeout_seconds`); a delivery that spent its first 25 s before
    the ledger claim (cold start, throttled ledger calls with botocore retries) claims only after
    States.Timeout. ReconcileStep ran first: no record, and the provider could not answer, so it
    wrote an UNKNOWN placeholder (no owner, attempts 0) and answered ESCALATE; the case is
    recorded ESCALATED (OUTCOME_UNCERTAIN: "confirm it with the downstream by business reference
    ... before doing anything else"). The late delivery's claim then finds that placeholder, takes
    it over (UNKNOWN -> TAKEOVER), its lookup says "not found", and it refunds: after the case was
    closed as escalated, with nothing left to tell the person. A person who looked first saw no
    refund and refunds by hand: two refunds for one approved action."""
    with tools_env(stack_tables) as env:
        # The provider's first answer (the reconcile lookup) is lost; later calls work.
        case = make_case("case-late", faults={"refund": ["timeout"]})
        execution = EXECUTION.format(case_id=case.case_id)
        env.cases.create(
            case, approval_digest(case), OwningExecution(execution, "t0"), approvals_required=1
        )
        provider = env.provider(case)
        request = action_request(case, Operation.REFUND)
        late = Delivery("IssueRefund", case.case_id).next()  # invoked; not yet claimed

        # States.Timeout -> ReconcileStep, before the late delivery reached the ledger.
        answer = reconcile_action(
            case,
            "refund",
            Delivery("ReconcileStep", case.case_id).next(),
            execution_arn=execution,
            ledger=env.ledger,
            reconcile=lambda: reconcile_refund(request.reference, provider),
            reattempt_window_seconds=provider.idempotency_window_seconds,
        )
        assert answer.decision == "ESCALATE"
        env.cases.record_outcome(  # Escalate -> RecordOutcome: the case is closed
            case,
            approval_digest(case),
            execution_arn=execution,
            outcome="ESCALATED",
            steps={},
            compensations=[],
            escalation={"reason": "OUTCOME_UNCERTAIN", "step": "refund"},
        )

        env.clock.advance(3)  # the late delivery's claim lands
        with pytest.raises(OutcomeUnknown, match="escalated to a person"):
            env.issue_refund(case, late, provider=provider, execution_arn=execution)

        record = env.record(request.key)
        assert env.case_record(case.case_id)["outcome"] == "ESCALATED"  # type: ignore[index]
        assert env.refunds(case.case_id) == 0, (
            f"a refund was made after the case was escalated; ledger now says "
            f"{record.status.value if record else None}"
        )


def test_a_released_record_of_the_previous_tree_is_looked_up_before_a_re_send(
    stack_tables: StackTables,
) -> None:
    """R3: a ledger record written by the tree before issue 9 (no `claimed_at`, no
    `first_dispatch_at`) that hides a possible dispatch is resumed WITHOUT a lookup.

    Before 6b941d0 a provider 409 was a TransientError: the lease was released (IN_PROGRESS, no
    owner) although the request holding the key was still in flight. Those records are still in
    the ledger table after the upgrade (30-day retention) and their executions are still
    redrivable (14 days). The current `decide` treats every IN_PROGRESS record without owner and
    without `first_dispatch_at` as "every earlier delivery provably sent nothing"
    (RESUME_RELEASED), which was not true of the records the old code wrote. A redrive after the
    provider's 24 h key retention refunds a second time: exactly the f5 hole, for the records
    written before the fix. A record without `claimed_at` is recognisably legacy
    (`LedgerRecord.from_item` falls back to `updated_at`)."""
    with tools_env(stack_tables, attempt_budget=8) as env:
        case = make_case("case-legacy", faults={"refund": ["in_flight"]})
        provider = env.provider(case)
        request = action_request(case, Operation.REFUND)
        deliveries = Delivery("IssueRefund", case.case_id)

        # d1: the request is accepted by the provider and still processing (read timeout).
        with pytest.raises(OutcomeUnknown):
            env.issue_refund(case, deliveries.next(), provider=provider, execution_arn="e")
        # d2 under the previous tree: takeover, lookup "not found", send -> 409 (the request in
        # flight commits meanwhile), mapped to TransientError, lease released. What that tree
        # left in the table: IN_PROGRESS, no owner, and neither claimed_at nor first_dispatch_at
        # (attributes it did not know).
        env.clock.advance(2)
        env.client.update_item(
            TableName=env.names["LEDGER_TABLE"],
            Key={"action_key": {"S": request.key}},
            UpdateExpression=(
                "SET #status = :ip, open_status = :ip, lease_expires_at = :now, "
                "attempts = :two REMOVE #owner, first_dispatch_at, claimed_at, #error"
            ),
            ExpressionAttributeNames={"#status": "status", "#owner": "owner", "#error": "error"},
            ExpressionAttributeValues={
                ":ip": {"S": "IN_PROGRESS"},
                ":now": {"N": str(int(env.clock()))},
                ":two": {"N": "2"},
            },
        )
        with pytest.raises(DownstreamConflict):  # the 409; the request in flight commits
            provider.refund(
                RefundRequest(
                    case_id=case.case_id,
                    business_ref=request.reference,
                    payment_reference=case.refund.payment_reference,
                    amount_minor=case.refund.amount_minor,
                    currency=case.refund.currency,
                ),
                idempotency_key=request.key,
            )
        assert env.refunds(case.case_id) == 1

        # The upgrade is deployed; the execution (FAILED at IssueRefund) is redriven a day later.
        env.clock.advance(25 * 3600)
        env.issue_refund(
            case, Delivery("IssueRefund-redrive", case.case_id).next(), execution_arn="e"
        )
        assert env.refunds(case.case_id) == 1, f"{env.refunds(case.case_id)} refunds"


class WorkerDied(BaseException):
    """The Lambda ran out of time mid-refund: nothing after the call ran."""


class DiesAtTheRefund:
    """The sandbox provider whose refund call never returns (the delivery dies there)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def refund(self, request: RefundRequest, *, idempotency_key: str) -> Any:
        raise WorkerDied

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)


DAY = 86400


@pytest.mark.parametrize(
    ("left_open", "faults"),
    [
        ("released", ["fail_before_commit"]),  # its lease given back: resumed at once
        ("abandoned", []),  # its delivery died holding it: taken over once the lease ran out
        ("unknown", ["timeout"]),  # its outcome is unknown: taken over, looked up first
    ],
)
def test_a_takeover_of_a_record_an_earlier_release_gave_a_retention_removes_it(
    stack_tables: StackTables, left_open: str, faults: list[str]
) -> None:
    """Issue 41, item 3: an earlier release wrote `expires_at` on records it left open. A new
    delivery that takes such a record over leaves it open (here it dies mid-refund), so the
    takeover itself must remove the retention: no open record carries one (§3.7), else TTL
    deletes an action nobody finished. Thirty-one days on, TTL has run and the record is there."""
    with tools_env(stack_tables) as env:
        case = make_case(f"case-legacy-{left_open}", faults={"refund": faults})
        request = action_request(case, Operation.REFUND)
        provider = env.provider(case)
        if left_open == "abandoned":
            with pytest.raises(WorkerDied):
                env.issue_refund(case, provider=DiesAtTheRefund(provider))
        else:
            with pytest.raises(TransientError if left_open == "released" else OutcomeUnknown):
                env.issue_refund(case, provider=provider)
        expires_at = int(env.clock()) + 30 * DAY
        env.admin.update_item(  # as the earlier release left it: a retention on an open record
            TableName=env.names["LEDGER_TABLE"],
            Key={"action_key": {"S": request.key}},
            UpdateExpression="SET expires_at = :at",
            ExpressionAttributeValues={":at": {"N": str(expires_at)}},
        )
        env.clock.advance(120)  # past the lease of a delivery that died

        late = Delivery("IssueRefund-redrive", case.case_id).next()
        with pytest.raises(WorkerDied):
            env.issue_refund(case, late, provider=DiesAtTheRefund(provider))

        item = env.admin.get_item(
            TableName=env.names["LEDGER_TABLE"],
            Key={"action_key": {"S": request.key}},
            ConsistentRead=True,
        )["Item"]
        assert (item["status"]["S"], item["owner"]["S"]) == ("IN_PROGRESS", late.attempt_id)
        assert "expires_at" not in item, item["expires_at"]
        env.clock.advance(31 * DAY)
        delete_expired_items(env.clock())
        record = env.record(request.key)
        assert record is not None and record.status.value == "IN_PROGRESS"
