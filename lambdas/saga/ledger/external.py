"""External effects (a payment provider, a carrier): claim, decide, then dispatch, replay, reject,
or take the record over and look the action up before anything is sent again (docs/design.md
§3.2-§3.6).

Request counts: a first delivery is 2 DynamoDB requests (the claim, the outcome); a replay of a
COMPLETED action is 1 (the claim whose condition fails returns the record). Under a daily refund
ceiling (§3.12) the claim is a transaction with the counter's charge (still one request), a
refused charge is recorded FAILED (a second request), and the provider's refusal gives the
charge back in its FAILED write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from saga.ceilings import DailyCharge
from saga.errors import BusinessRejection, OutcomeUnknown, ReplayWindowExpired, TransientError
from saga.identity import ActionRequest
from saga.ledger.charges import ChargeRefused
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
    charge: DailyCharge | None  # the daily refund ceiling's charge (§3.12), with the first claim

    def first_claim_charge(self, record: LedgerRecord) -> DailyCharge | None:
        """The charge a takeover of `record` makes: only a placeholder no delivery claimed is
        charged by its takeover; a record claimed before was charged by its claim (or claimed
        before its tenant had a ceiling), and a takeover, a retry or a redrive never charges
        again."""
        return self.charge if record.unclaimed else None


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
        charge: DailyCharge | None = None,
    ) -> ActionOutcome:
        """ActionLedger.execute."""
        core = self.core
        run = _Delivery(
            request, attempt, effect, reconcile, reattempt_window_seconds, companion, charge
        )
        try:
            held, existing = core.store.claim(request, attempt, charge)
        except ChargeRefused as refused:
            existing = self._record_refusal(run, refused, over=None)  # raises when recorded
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
            try:
                taken, current = core.store.take_over(
                    request, attempt, record, run.first_claim_charge(record)
                )
            except ChargeRefused as refused:
                record = self._record_refusal(run, refused, over=record)  # raises when recorded
                continue
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

    def _record_refusal(
        self, run: _Delivery, refused: ChargeRefused, *, over: LedgerRecord | None
    ) -> LedgerRecord:
        """A charge the ceiling refused, recorded FAILED (RefundLimitReached, with the numbers)
        where the claim found no record, or over the placeholder as seen: a second conditional
        write, since the cancelled transaction wrote nothing. Raised once written, so every
        repeat replays it and a redrive never refunds behind it. Nothing was dispatched: no
        delivery claimed the action. Returns the record met instead (written meanwhile)."""
        core = self.core
        request, attempt = run.request, run.attempt
        error = refused.charge.refused(refused.used, refused.day)
        item = core.store.record(
            request,
            attempt,
            core.clock(),
            LedgerStatus.FAILED,
            attempts=1 if over is None else over.attempts + 1,
            error=error.to_record(),
            carried=over,
        )
        existing = core.store.put_new(item, over=over)
        if existing is None:
            core.observe(LedgerEvent.LIMIT_REACHED, request, LedgerRecord.from_item(item))
            raise error
        return existing

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
            if run.charge is not None and held.charged_day is not None:
                # The provider refused for good: its charge comes back with the record (§3.12).
                core.fail_giving_back(request, attempt, held, rejection, run.charge)
            else:
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
