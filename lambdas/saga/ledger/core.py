"""What every delivery does, whichever operation runs it: decide from a record (observed), answer
the decisions that need no write, record its outcome, give its lease back, ask a downstream.

The ledger's operations (external.py, transaction.py, reconcile.py) share one `LedgerCore`:
the table's conditional writes (store.py), the policy, the clock and the observer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from saga.ceilings import DailyCharge
from saga.errors import ActionPending, ActionSettled, BusinessRejection, OutcomeUnknown
from saga.identity import ActionRequest
from saga.ledger.decisions import Decision, answer, decide, reattempt_refusal, settled_text
from saga.ledger.observer import LedgerEvent, LedgerObserver
from saga.ledger.records import (
    ActionOutcome,
    Attempt,
    CompanionWrite,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
    Reconciliation,
    Undeterminable,
)
from saga.ledger.store import LeaseLost, LedgerStore, NotCommitted, SettledMeanwhile

MAX_DECISION_ROUNDS = 4  # a contended takeover re-decides from the winner's record


class LedgerCore:
    def __init__(
        self,
        store: LedgerStore,
        policy: LedgerPolicy,
        clock: Callable[[], float],
        observer: LedgerObserver,
    ) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.observer = observer

    def observe(
        self, name: Decision | LedgerEvent, request: ActionRequest, record: LedgerRecord | None
    ) -> None:
        self.observer.on_decision(name.value, request, record)

    def decide(self, request: ActionRequest, attempt: Attempt, record: LedgerRecord) -> Decision:
        """The row of the decision table for `record` (observed)."""
        decision = decide(
            record,
            digest=request.digest,
            attempt_id=attempt.attempt_id,
            now=self.clock(),
            budget=self.policy.attempt_budget,
        )
        self.observe(decision, request, record)
        return decision

    def answer(
        self, decision: Decision, request: ActionRequest, record: LedgerRecord
    ) -> ActionOutcome:
        """A decision that needs no write: the replayed outcome, or its error raised."""
        return answer(decision, request, record, budget=self.policy.attempt_budget)

    def reattempt_refused(
        self, since: float | None, window_seconds: float | None, attempt: Attempt
    ) -> str | None:
        """Why "not found" does not allow this delivery a re-attempt (decisions.py), or None."""
        return reattempt_refusal(
            since,
            window_seconds,
            now=self.clock(),
            lease_seconds=self.policy.lease_seconds(attempt.remaining_seconds),
        )

    def finish(
        self, request: ActionRequest, attempt: Attempt, status: LedgerStatus, **outcome: Any
    ) -> LedgerRecord:
        """Record this delivery's outcome (store.finish); a lost lease is OutcomeUnknown. An
        outcome recorded on an action a person settled meanwhile is ActionSettled: the effect
        is on record next to the decision, and the automation stops there (§3.10)."""
        try:
            written = self.store.finish(request, attempt, status, **outcome)
        except LeaseLost as lost:
            self.observe(LedgerEvent.LEASE_LOST, request, lost.current)
            raise OutcomeUnknown(str(lost)) from lost
        return self._recorded(request, attempt, status, written)

    def fail_giving_back(
        self,
        request: ActionRequest,
        attempt: Attempt,
        held: LedgerRecord,
        rejection: BusinessRejection,
        charge: DailyCharge,
    ) -> LedgerRecord:
        """`finish` FAILED for a refund the provider refused, with its charge given back to the
        day it was charged, in the same write (store.fail_giving_back, §3.12)."""
        try:
            written = self.store.fail_giving_back(
                request, attempt, held, rejection.to_record(), charge
            )
        except LeaseLost as lost:
            self.observe(LedgerEvent.LEASE_LOST, request, lost.current)
            raise OutcomeUnknown(str(lost)) from lost
        return self._recorded(request, attempt, LedgerStatus.FAILED, written)

    def _recorded(
        self, request: ActionRequest, attempt: Attempt, status: LedgerStatus, written: LedgerRecord
    ) -> LedgerRecord:
        if written.resolution is not None:
            self.observe(LedgerEvent.OUTCOME_AFTER_SETTLEMENT, request, written)
            raise ActionSettled(
                f"{settled_text(request.key, written)} while attempt {attempt.attempt_id} held "
                f"it; its {status.value} outcome is recorded with the decision"
            )
        self.observe(LedgerEvent(status.value.lower()), request, written)
        return written

    def complete(
        self,
        request: ActionRequest,
        attempt: Attempt,
        held: LedgerRecord,
        *,
        result: dict[str, Any],
        downstream_ref: str | None,
        companion: CompanionWrite | None,
    ) -> LedgerRecord:
        """Record this delivery's COMPLETED outcome over the record it `held`, with the
        companion's write in the same transaction (docs/design.md §3.11). The effect is never
        left unrecorded: when the transaction wrote nothing though this delivery still owns the
        record (the companion's condition failed, a conflict), the completion is written alone
        first, then the companion's refusal is raised (or the companion written alone)."""
        if companion is None:
            return self.finish(
                request,
                attempt,
                LedgerStatus.COMPLETED,
                result=result,
                downstream_ref=downstream_ref,
            )
        try:
            now = self.store.complete_with(
                request, attempt, companion, result=result, downstream_ref=downstream_ref
            )
        except LeaseLost as lost:
            self.observe(LedgerEvent.LEASE_LOST, request, lost.current)
            raise OutcomeUnknown(str(lost)) from lost
        except SettledMeanwhile as settled:
            # The effect is on record next to the decision; the companion's refusal (a resolved
            # case record) says so to a person, for an effect after a decision needs one (§3.10).
            self.observe(LedgerEvent.OUTCOME_AFTER_SETTLEMENT, request, settled.record)
            if settled.item is not None:
                raise companion.refused(settled.item) from settled
            raise ActionSettled(
                f"{settled_text(request.key, settled.record)} while attempt "
                f"{attempt.attempt_id} held it; its COMPLETED outcome is recorded with the decision"
            ) from settled
        except NotCommitted as cancelled:
            written = self.finish(
                request,
                attempt,
                LedgerStatus.COMPLETED,
                result=result,
                downstream_ref=downstream_ref,
            )
            if cancelled.item is not None:
                raise companion.refused(cancelled.item) from cancelled
            self.store.write_companion(companion)
            return written
        # A transaction answers no attributes: the record is the one held, as just completed.
        written = replace(
            held,
            status=LedgerStatus.COMPLETED,
            result=dict(result),
            downstream_ref=downstream_ref,
            error=None,
            updated_at=now,
            expires_at=self.policy.expires_at(now),
        )
        self.observe(LedgerEvent.COMPLETED, request, written)
        return written

    def release(self, request: ActionRequest, attempt: Attempt) -> None:
        """Give the lease back: this delivery sent nothing (store.release)."""
        self.observe(self.store.release(request, attempt), request, None)


class Operations:
    """A family of the ledger's operations (external.py, transaction.py, reconcile.py) over the
    core they share."""

    def __init__(self, core: LedgerCore) -> None:
        self.core = core


def ask(reconcile: Callable[[], Reconciliation]) -> Reconciliation:
    """A reconciliation that itself fails has not determined anything."""
    try:
        return reconcile()
    except Exception as exc:
        return Undeterminable(f"reconciliation failed: {type(exc).__name__}: {exc}")


def contended(key: str) -> ActionPending:
    return ActionPending(f"action {key} is contended; try again later")
