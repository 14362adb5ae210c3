"""External effects (a payment provider, a carrier): claim, decide, then dispatch, replay, reject,
or take the record over and look the action up before anything is sent again (design.md §3.2-§3.6).

Request counts: a first delivery is 2 DynamoDB requests (the claim, the outcome); a replay of a
COMPLETED action is 1 (the claim whose condition fails returns the record).
"""

from __future__ import annotations

from collections.abc import Callable

from saga.errors import BusinessRejection, OutcomeUnknown, ReplayWindowExpired, TransientError
from saga.identity import ActionRequest
from saga.ledger.core import MAX_DECISION_ROUNDS, Operations, ask, contended
from saga.ledger.decisions import TAKEOVERS, Decision
from saga.ledger.observer import LedgerEvent
from saga.ledger.records import (
    Absent,
    ActionOutcome,
    Attempt,
    EffectResult,
    Found,
    LedgerRecord,
    LedgerStatus,
    Reconciliation,
)

Effect = Callable[[], EffectResult]
Lookup = Callable[[], Reconciliation]


class ExternalEffects(Operations):
    def execute(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect: Effect,
        reconcile: Lookup,
        reattempt_window_seconds: float | None,
    ) -> ActionOutcome:
        """ActionLedger.execute."""
        core = self.core
        held, existing = core.store.claim(request, attempt)
        if existing is None:
            core.observe(Decision.CLAIMED, request, None)
            if held.first_dispatch_at is None:
                return self._dispatch(request, attempt, held.claimed_at, effect)
            # an earlier record may have expired: look the action up first
            return self._reconcile_then_dispatch(
                request,
                attempt,
                held,
                effect=effect,
                reconcile=reconcile,
                window_seconds=reattempt_window_seconds,
            )
        record = existing
        for _ in range(MAX_DECISION_ROUNDS):
            decision = core.decide(request, attempt, record)
            if decision is Decision.OWN_CLAIM:
                return self._dispatch(request, attempt, record.claimed_at, effect)
            if decision is Decision.BUDGET_EXHAUSTED:
                found = self._look_up_without_dispatch(request, record, reconcile)
                if found is None:
                    record = core.store.get(request.key) or record
                    continue
                return found
            if decision not in TAKEOVERS:
                return core.answer(decision, request, record)
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
                return self._dispatch(request, attempt, taken.claimed_at, effect)
            return self._reconcile_then_dispatch(
                request,
                attempt,
                taken,
                effect=effect,
                reconcile=reconcile,
                window_seconds=reattempt_window_seconds,
            )
        raise contended(request.key)

    def _reconcile_then_dispatch(
        self,
        request: ActionRequest,
        attempt: Attempt,
        held: LedgerRecord,
        *,
        effect: Effect,
        reconcile: Lookup,
        window_seconds: float | None,
    ) -> ActionOutcome:
        # An expired lease proves lost ownership, not a failed effect: ask before re-running.
        core = self.core
        found = ask(reconcile)
        if isinstance(found, Found):
            written = core.finish(
                request,
                attempt,
                LedgerStatus.COMPLETED,
                result=found.result,
                downstream_ref=found.downstream_ref,
            )
            core.observe(LedgerEvent.RECONCILED, request, written)
            return ActionOutcome.of(written, replayed=False, reconciled=True)
        if isinstance(found, Absent):
            since = held.may_have_dispatched_since(core.clock())
            reason = core.reattempt_refused(since, window_seconds, attempt)
            if reason is None:
                return self._dispatch(request, attempt, held.claimed_at, effect)
        else:
            reason = f"outcome of an earlier attempt cannot be determined: {found.reason}"
        unknown = OutcomeUnknown(f"action {request.key}: {reason}")
        core.finish(request, attempt, LedgerStatus.UNKNOWN, error=unknown.to_record())
        raise unknown

    def _dispatch(
        self, request: ActionRequest, attempt: Attempt, claimed_at: float, effect: Effect
    ) -> ActionOutcome:
        """Run the effect once; what it raised decides the record (design.md §3.4)."""
        core = self.core
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
        written = core.finish(
            request,
            attempt,
            LedgerStatus.COMPLETED,
            result=done.result,
            downstream_ref=done.downstream_ref,
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
