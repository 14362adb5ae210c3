"""The reconcile tool's protocol (docs/design.md §3.8): settle an uncertain action from the
downstream's evidence, and answer RESUME, RETRY or ESCALATE. It never dispatches.

COMPLETED -> RESUME (replayed); FAILED -> the recorded error; settled by a person ->
ActionSettled, without asking the downstream or writing anything (the case is resolved: there
is nobody left to escalate to, §3.10); a live lease of
another owner -> ActionPending; otherwise the downstream is asked: Found -> COMPLETED, RESUME;
Absent -> RETRY inside the budget while a re-attempt cannot make a second effect (§3.6), else
ESCALATE (UNKNOWN when an earlier request may still commit); Undeterminable -> UNKNOWN,
ESCALATE. Every ESCALATE marks the record, so that no late delivery acts behind the person's
back and a repeated reconcile gives the same answer. It works on a record past its retention
too (every write renews it), and on a missing record (a placeholder counts the RETRY).
"""

from __future__ import annotations

from collections.abc import Callable

from saga.errors import ActionPending, OutcomeUnknown
from saga.identity import ActionRequest
from saga.ledger.core import MAX_DECISION_ROUNDS, Operations, ask, contended
from saga.ledger.decisions import (
    REJECTIONS,
    Decision,
    decide,
    earlier_record_may_have_expired,
    escalated_text,
)
from saga.ledger.observer import LedgerEvent
from saga.ledger.records import (
    Absent,
    ActionOutcome,
    Attempt,
    Found,
    LedgerRecord,
    LedgerStatus,
    ReconcileAnswer,
    ReconcileDecision,
    Reconciliation,
    Undeterminable,
)

Lookup = Callable[[], Reconciliation]
# The rows reconciliation answers from the record alone (the others ask the downstream).
_ANSWERED_FROM_THE_RECORD = REJECTIONS | {Decision.SETTLED, Decision.ESCALATED, Decision.REPLAYED}


class Reconciler(Operations):
    def reconcile(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        reconcile: Lookup,
        reattempt_window_seconds: float | None,
    ) -> ReconcileDecision:
        """ActionLedger.reconcile."""
        core = self.core
        budget = core.policy.attempt_budget
        for _ in range(MAX_DECISION_ROUNDS):
            record = core.store.get(request.key)
            if record is None:
                return self._without_record(request, attempt, reconcile, reattempt_window_seconds)
            # Expired or not: reading the downstream is safe, and every write renews the record.
            decision = decide(
                record,
                digest=request.digest,
                attempt_id=attempt.attempt_id,
                now=core.clock(),
                budget=budget,
                check_expiry=False,
            )
            if decision in _ANSWERED_FROM_THE_RECORD:
                core.observe(decision, request, record)
            if decision is Decision.SETTLED:
                # A person resolved the case: nothing to ask and nobody to escalate to again.
                core.answer(decision, request, record)  # raises ActionSettled
            if decision is Decision.ESCALATED:  # answered before: the same answer again
                return self._escalate(escalated_text(request.key, record), record.attempts)
            if decision is Decision.REPLAYED:
                outcome = ActionOutcome.of(record, replayed=True, reconciled=False)
                return self._resume("already completed", outcome)
            if decision in REJECTIONS:
                core.answer(decision, request, record)  # raises
            # open and not held by a live attempt (budget or not): ask the downstream
            found = ask(reconcile)
            if isinstance(found, Found):
                written = core.store.settle_seen(request, record, found=found)
                if written is None:
                    continue  # the record changed under us: decide again from the new state
                core.observe(LedgerEvent.RECONCILED, request, written)
                outcome = ActionOutcome.of(written, replayed=False, reconciled=True)
                return self._resume("found at the downstream", outcome)
            if isinstance(found, Absent):
                refused = core.reattempt_refused(
                    record.may_have_dispatched_since(core.clock()),
                    reattempt_window_seconds,
                    attempt,
                )
                if refused is None:
                    if record.attempts < budget and record.reconcile_rounds < budget:
                        counted = core.store.count_retry(request, record)
                        if counted is None:
                            continue
                        return self._retry(counted)
                    reason = (
                        f"not found at the downstream and the budget of {budget} attempts is "
                        f"spent ({record.attempts} attempts, {record.reconcile_rounds} "
                        "re-attempts)"
                    )
                    marked = core.store.mark_escalated(request, record)
                    if marked is None:
                        continue
                    core.observe(Decision.BUDGET_EXHAUSTED, request, marked)
                    return self._escalate(reason, record.attempts)
                recorded, reason = refused, refused
            else:
                recorded, reason = found.reason, f"outcome cannot be determined: {found.reason}"
            written = core.store.settle_seen(request, record, unknown_reason=recorded)
            if written is None:
                continue
            core.observe(LedgerEvent.UNKNOWN, request, written)
            return self._escalate(reason, written.attempts)
        raise contended(request.key)

    def _without_record(
        self,
        request: ActionRequest,
        attempt: Attempt,
        reconcile: Lookup,
        window_seconds: float | None,
    ) -> ReconcileDecision:
        core = self.core
        found = ask(reconcile)
        now = core.clock()
        # No record may still hide one that expired (an old execution): then a delivery may have
        # dispatched since the execution started.
        since = earlier_record_may_have_expired(
            attempt.execution_started_at, now=now, retention_seconds=core.policy.retention_seconds
        )
        refused = (
            core.reattempt_refused(since, window_seconds, attempt)
            if isinstance(found, Absent)
            else None
        )
        if isinstance(found, Absent) and refused is None:
            # A placeholder nobody holds, so that the RETRY it answers is counted even when the
            # re-attempt never reaches the ledger (the loop ends within the budget), and the
            # re-attempt takes it over (a lookup first when `since` says an earlier delivery
            # may have dispatched).
            item = core.store.record(
                request,
                attempt,
                now,
                LedgerStatus.IN_PROGRESS,
                attempts=0,
                owner=False,
                reconcile_rounds=1,
                first_dispatch_at=since,
            )
        elif isinstance(found, Found):
            item = core.store.record(
                request,
                attempt,
                now,
                LedgerStatus.COMPLETED,
                attempts=1,
                result=found.result,
                downstream_ref=found.downstream_ref,
            )
        else:
            # Recorded, escalated: no later delivery may act on it (a person decides).
            reason = refused or (
                found.reason if isinstance(found, Undeterminable) else "undeterminable"
            )
            item = core.store.record(
                request,
                attempt,
                now,
                LedgerStatus.UNKNOWN,
                attempts=0,
                error=OutcomeUnknown(reason).to_record(),
                owner=False,
                first_dispatch_at=since,
                escalated=True,
            )
        if core.store.put_new(item) is not None:  # someone wrote it meanwhile: decide again
            raise ActionPending(f"action {request.key} changed during reconciliation; retry")
        written = LedgerRecord.from_item(item)
        if isinstance(found, Found):
            core.observe(LedgerEvent.RECONCILED, request, written)
            outcome = ActionOutcome.of(written, replayed=False, reconciled=True)
            return self._resume("found at the downstream", outcome)
        if written.status is LedgerStatus.IN_PROGRESS:
            return self._retry(written)
        core.observe(LedgerEvent.UNKNOWN, request, written)
        reason = refused or f"outcome cannot be determined: {getattr(found, 'reason', '')}"
        return self._escalate(reason, 0)

    def _resume(self, reason: str, outcome: ActionOutcome) -> ReconcileDecision:
        return ReconcileDecision(
            ReconcileAnswer.RESUME,
            reason,
            outcome,
            outcome.attempts,
            self.core.policy.attempt_budget,
        )

    def _retry(self, record: LedgerRecord) -> ReconcileDecision:
        budget = self.core.policy.attempt_budget
        return ReconcileDecision(
            ReconcileAnswer.RETRY,
            f"not found at the downstream; re-attempt {record.reconcile_rounds} of {budget}",
            None,
            record.attempts,
            budget,
        )

    def _escalate(self, reason: str, attempts: int) -> ReconcileDecision:
        return ReconcileDecision(
            ReconcileAnswer.ESCALATE, reason, None, attempts, self.core.policy.attempt_budget
        )
