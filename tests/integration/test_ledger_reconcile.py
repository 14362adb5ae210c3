"""`ActionLedger.reconcile`: the Reconcile tool's view. It never dispatches."""

from __future__ import annotations

from typing import Any

import pytest

from saga.errors import ActionPending, KeyConflict, OutcomeUnknown, RefundRejected
from saga.ledger import ActionLedger, Attempt, EffectResult, LedgerPolicy, LedgerStatus
from tests.integration.ledger_harness import CountingDownstream, FakeClock, refund_request

REQUEST = refund_request()
REF = REQUEST.action_id


def make_unknown(ledger: ActionLedger, downstream: CountingDownstream, *, dispatched: bool) -> None:
    def effect() -> EffectResult:
        if dispatched:
            downstream.refund(REF, 2000)
        raise OutcomeUnknown("timed out")

    with pytest.raises(OutcomeUnknown):
        ledger.execute(REQUEST, Attempt("a1", 30), effect=effect, reconcile=downstream.lookup(REF))


def test_completed_action_resumes_with_the_recorded_result(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    done = ledger.execute(
        REQUEST, Attempt("a1", 30), effect=downstream.effect(REF), reconcile=downstream.lookup(REF)
    )
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    assert decision.decision == "RESUME"
    assert decision.outcome is not None and decision.outcome.replayed
    assert decision.outcome.result == done.result
    assert downstream.lookups == 0  # the record answered


def test_unknown_found_downstream_is_recorded_completed_and_resumes(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    make_unknown(ledger, downstream, dispatched=True)
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))

    assert decision.decision == "RESUME"
    assert decision.outcome is not None and decision.outcome.reconciled
    assert decision.outcome.result == downstream.effects[0]
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert len(downstream.effects) == 1


def test_unknown_absent_downstream_retries_inside_the_budget_then_escalates(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    make_unknown(ledger, downstream, dispatched=False)
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    assert (decision.decision, decision.attempts, decision.budget) == ("RETRY", 1, 5)

    # the retried step takes over the UNKNOWN record, reconciles Absent and dispatches once
    outcome = ledger.execute(
        REQUEST, Attempt("a2", 30), effect=downstream.effect(REF), reconcile=downstream.lookup(REF)
    )
    assert len(downstream.effects) == 1 and outcome.attempts == 2


def test_absent_with_the_budget_spent_escalates(
    dynamodb: Any, ledger_table: str, downstream: CountingDownstream, clock: FakeClock
) -> None:
    ledger = ActionLedger(ledger_table, dynamodb, LedgerPolicy(attempt_budget=1), clock=clock)
    make_unknown(ledger, downstream, dispatched=False)
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    assert decision.decision == "ESCALATE"
    assert "budget of 1 attempts is spent" in decision.reason
    assert downstream.effects == []


def test_undeterminable_records_unknown_and_escalates(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    make_unknown(ledger, downstream, dispatched=True)
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.cannot_tell())
    assert decision.decision == "ESCALATE"
    assert "provider lookup unavailable" in decision.reason
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.UNKNOWN
    assert record.error == {"type": "OutcomeUnknown", "message": "provider lookup unavailable"}


def test_live_lease_of_another_attempt_is_pending(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    ledger.store.claim(REQUEST, Attempt("a1", 30))
    with pytest.raises(ActionPending):
        ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    assert downstream.lookups == 0


def test_recorded_failure_and_conflict_are_raised(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    def rejected() -> EffectResult:
        raise RefundRejected("closed")

    with pytest.raises(RefundRejected):
        ledger.execute(
            REQUEST, Attempt("a1", 30), effect=rejected, reconcile=downstream.lookup(REF)
        )
    with pytest.raises(RefundRejected, match="closed"):
        ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    with pytest.raises(KeyConflict):
        ledger.reconcile(
            refund_request(amount_minor=1), Attempt("r2", 30), reconcile=downstream.lookup(REF)
        )


def test_no_record_found_downstream_writes_completed(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    downstream.refund(REF, 2000)
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.lookup(REF))
    assert decision.decision == "RESUME"
    replay = ledger.execute(
        REQUEST, Attempt("a1", 30), effect=downstream.effect(REF), reconcile=downstream.lookup(REF)
    )
    assert replay.replayed and len(downstream.effects) == 1


def test_no_record_undeterminable_leaves_an_escalated_unknown_no_late_delivery_acts_on(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    """ESCALATE hands the action to a person: a delivery that claims only now (it was slow
    before its claim, the task already timed out) must not act behind their back."""
    decision = ledger.reconcile(REQUEST, Attempt("r1", 30), reconcile=downstream.cannot_tell())
    assert decision.decision == "ESCALATE"
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.UNKNOWN and record.escalated_at

    with pytest.raises(OutcomeUnknown, match="escalated to a person"):
        ledger.execute(
            REQUEST,
            Attempt("late", 30),
            effect=downstream.effect(REF),
            reconcile=downstream.lookup(REF),
        )
    assert downstream.effects == [] and downstream.lookups == 1  # the reconcile's own lookup
    again = ledger.reconcile(REQUEST, Attempt("r2", 30), reconcile=downstream.lookup(REF))
    assert again.decision == "ESCALATE" and downstream.lookups == 1  # the same answer
