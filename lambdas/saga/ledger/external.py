"""External effects (a payment provider, a carrier): claim, decide, then dispatch, replay, reject,
or take the record over and look the action up before anything is sent again (docs/design.md
§3.2-§3.6).

Request counts: a first delivery is 2 DynamoDB requests (the claim, the outcome); a replay of a
COMPLETED action is 1 (the claim whose condition fails returns the record).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from saga.errors import BusinessRejection, OutcomeUnknown, ReplayWindowExpired, TransientError
from saga.identity import ActionRequest
from saga.ledger.core import MAX_DECISION_ROUNDS, Operations, ask, contended
from saga.ledger.decisions import TAKEOVERS, Decision
from saga.ledger.observer import LedgerEvent
from saga.ledger.records import (
    Absent,
    ActionOutcome,
    Attempt,
    CompanionWrite,
    EffectResult,
    Found,
    LedgerRecord,
    LedgerStatus,
    Reconciliation,
)

Effect = Callable[[], EffectResult]
Lookup = Callable[[], Reconciliation]


@dataclass(frozen=True)
class _Delivery:
    """One `execute` call: what the delivery runs, how it looks the action up, and what is
    written with its completion."""

    request: ActionRequest
    attempt: Attempt
    effect: Effect
    reconcile: Lookup
    window_seconds: float | None
    companion: CompanionWrite | None


class ExternalEffects(Operations):
    def execute(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect: Effect,
        reconcile: Lookup,
        reattempt_window_seconds: float | None,
        companion: CompanionWrite | None = None,
    ) -> ActionOutcome:
        """ActionLedger.execute."""
        core = self.core
        run = _Delivery(request, attempt, effect, reconcile, reattempt_window_seconds, companion)
        held, existing = core.store.claim(request, attempt)
        if existing is None:
            core.observe(Decision.CLAIMED, request, None)
            if held.first_dispatch_at is None:
                return self._dispatch(run, held)
            # an earlier record may have expired: look the action up first
            return self._reconcile_then_dispatch(run, held)
        record = existing
        for _ in range(MAX_DECISION_ROUNDS):
            decision = core.decide(request, attempt, record)
            if decision is Decision.OWN_CLAIM:
                return self._dispatch(run, record)
            if decision is Decision.BUDGET_EXHAUSTED:
                found = self._look_up_without_dispatch(request, record, reconcile)
                if found is None:
                    record = core.store.get(request.key) or record
                    continue
                return self._completed_before(run, found)
            if decision not in TAKEOVERS:
                return self._completed_before(run, core.answer(decision, request, record))
            taken, current = core.store.take_over(request, attempt, record)
            if taken is None:
                if current is None:
                    raise ReplayWindowExpired(
                        f"ledger record {request.key} disappeared (retention passed); "
                        "not executing, reconcile instead"
                    )
                record = current
                continue
            if decision is Decision.RESUME_RELEASED:
                return self._dispatch(run, taken)
            return self._reconcile_then_dispatch(run, taken)
        raise contended(request.key)

    def _completed_before(self, run: _Delivery, outcome: ActionOutcome) -> ActionOutcome:
        """An outcome this delivery did not write (a replay, a lookup's): the companion's
        write follows the record (§3.11)."""
        if run.companion is not None:
            self.core.store.write_companion(run.companion)
        return outcome

    def _reconcile_then_dispatch(self, run: _Delivery, held: LedgerRecord) -> ActionOutcome:
        # An expired lease proves lost ownership, not a failed effect: ask before re-running.
        core = self.core
        request, attempt = run.request, run.attempt
        found = ask(run.reconcile)
        if isinstance(found, Found):
            written = core.complete(
                request,
                attempt,
                held,
                result=found.result,
                downstream_ref=found.downstream_ref,
                companion=run.companion,
            )
            core.observe(LedgerEvent.RECONCILED, request, written)
            return ActionOutcome.of(written, replayed=False, reconciled=True)
        if isinstance(found, Absent):
            since = held.may_have_dispatched_since(core.clock())
            reason = core.reattempt_refused(since, run.window_seconds, attempt)
            if reason is None:
                return self._dispatch(run, held)
        else:
            reason = f"outcome of an earlier attempt cannot be determined: {found.reason}"
        unknown = OutcomeUnknown(f"action {request.key}: {reason}")
        core.finish(request, attempt, LedgerStatus.UNKNOWN, error=unknown.to_record())
        raise unknown

    def _dispatch(self, run: _Delivery, held: LedgerRecord) -> ActionOutcome:
        """Run the effect once; what it raised decides the record (docs/design.md §3.4)."""
        core = self.core
        request, attempt, effect, claimed_at = run.request, run.attempt, run.effect, held.claimed_at
        try:
            done = effect()
        except BusinessRejection as rejection:
            core.finish(request, attempt, LedgerStatus.FAILED, error=rejection.to_record())
            raise
        except TransientError:
            # Only a failure that provably sent nothing is a TransientError.
            core.release(request, attempt)
            raise
        except OutcomeUnknown as uncertain:
            core.finish(
                request,
                attempt,
                LedgerStatus.UNKNOWN,
                error=uncertain.to_record(),
                dispatched_at=claimed_at,
            )
            raise
        except Exception as exc:
            unknown = OutcomeUnknown(
                f"action {request.key}: effect ended with {type(exc).__name__}: {exc}"
            )
            core.finish(
                request,
                attempt,
                LedgerStatus.UNKNOWN,
                error=unknown.to_record(),
                dispatched_at=claimed_at,
            )
            raise unknown from exc
        written = core.complete(
            request,
            attempt,
            held,
            result=done.result,
            downstream_ref=done.downstream_ref,
            companion=run.companion,
        )
        return ActionOutcome.of(written, replayed=False, reconciled=False)

    def _look_up_without_dispatch(
        self, request: ActionRequest, seen: LedgerRecord, reconcile: Lookup
    ) -> ActionOutcome | None:
        """The budget is spent: no dispatch, but the lookup is free of effects. Found -> the
        record COMPLETED (None if it changed meanwhile); else BudgetExhausted."""
        core = self.core
        found = ask(reconcile)
        if not isinstance(found, Found):
            return core.answer(Decision.BUDGET_EXHAUSTED, request, seen)  # raises
        written = core.store.settle_seen(request, seen, found=found)
        if written is None:
            return None
        core.observe(LedgerEvent.RECONCILED, request, written)
        return ActionOutcome.of(written, replayed=False, reconciled=True)
