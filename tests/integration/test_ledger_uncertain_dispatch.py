"""What a delivery learned decides the record (docs/design.md §3): "may have reached the downstream"
is remembered for good, every takeover of such a record looks the action up first, and a "not
found" allows a re-attempt only while a request still in flight would be deduplicated.

The downstream here has no idempotency of its own (`CountingDownstream`), so every blind
re-dispatch shows up as a second effect; `InFlight` is a request the downstream accepted and
commits late, after the caller gave up on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from saga.errors import OutcomeUnknown, TransientError
from saga.ledger import (
    ActionLedger,
    ActionOutcome,
    Attempt,
    Decision,
    EffectResult,
    LedgerEvent,
    LedgerPolicy,
    LedgerStatus,
    ReconcileDecision,
    decide,
)
from tests.integration.ledger_harness import (
    CountingDownstream,
    FakeClock,
    RecordingObserver,
    refund_request,
)

REQUEST = refund_request()
REF = REQUEST.reference
KEY_RETENTION = 24 * 3600  # the provider deduplicates a key this long (Stripe: 24 h)


@dataclass
class InFlight:
    """A request the downstream accepted: it has not committed yet and will, later."""

    downstream: CountingDownstream
    committed: bool = False

    def send(self) -> EffectResult:
        raise OutcomeUnknown("read timeout: the provider did not answer")

    def commit(self) -> None:
        if not self.committed:
            self.downstream.refund(REF, 2000)
            self.committed = True


def attempt(name: str) -> Attempt:
    return Attempt(name, remaining_seconds=25)


def deliver(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    name: str,
    effect: Callable[[], EffectResult],
    *,
    window: float | None = None,
) -> ActionOutcome:
    """Delivery `name` of the refund: `effect` is its call to the provider, and a takeover
    looks the refund up at `downstream` (`window`: the provider's key retention, if any)."""
    return ledger.execute(
        REQUEST,
        attempt(name),
        effect=effect,
        reconcile=downstream.lookup(REF),
        reattempt_window_seconds=window,
    )


def reconcile_refund(
    ledger: ActionLedger, downstream: CountingDownstream, name: str, *, window: float | None = None
) -> ReconcileDecision:
    """The reconcile tool's question about the refund, asked as attempt `name`."""
    return ledger.reconcile(
        REQUEST, attempt(name), reconcile=downstream.lookup(REF), reattempt_window_seconds=window
    )


def test_a_released_lease_after_an_uncertain_delivery_is_looked_up_before_any_dispatch(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    """d1 times out with its request in flight; d2 finds nothing and sends again, but the
    provider answers "in progress" and nothing else: the lease goes back. The record must still
    say that d1 may have reached the downstream, so d3 looks the refund up (d1's request has
    committed meanwhile) instead of dispatching blind and refunding twice."""
    request_x = InFlight(downstream)
    with pytest.raises(OutcomeUnknown):
        deliver(ledger, downstream, "d1", request_x.send)
    first = ledger.get(REQUEST.key)
    assert first is not None and first.status is LedgerStatus.UNKNOWN
    assert first.first_dispatch_at == first.claimed_at

    def provider_busy() -> EffectResult:
        raise TransientError("the provider refused the connection before the request was sent")

    clock.advance(1)
    with pytest.raises(TransientError):
        deliver(ledger, downstream, "d2", provider_busy)
    released = ledger.get(REQUEST.key)
    assert released is not None
    assert (released.status, released.owner) == (LedgerStatus.IN_PROGRESS, None)
    assert released.first_dispatch_at == first.first_dispatch_at  # never forgotten

    request_x.commit()
    clock.advance(1)
    outcome = deliver(ledger, downstream, "d3", downstream.effect(REF))
    assert outcome.reconciled
    assert len(downstream.effects_for(REF)) == 1


def test_not_found_allows_a_re_attempt_only_inside_the_key_retention(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    with pytest.raises(OutcomeUnknown):  # d1's request is in flight
        deliver(ledger, downstream, "d1", InFlight(downstream).send)

    clock.advance(KEY_RETENTION)  # the provider has forgotten the key of d1's request
    with pytest.raises(OutcomeUnknown, match="may still commit"):
        deliver(ledger, downstream, "d2", downstream.effect(REF), window=KEY_RETENTION)
    assert downstream.effects_for(REF) == []  # nothing sent
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.UNKNOWN
    assert record.error is not None and "may still commit" in record.error["message"]

    # The same reconcile question from the reconcile tool escalates instead of RETRY.
    decision = reconcile_refund(ledger, downstream, "reconcile", window=KEY_RETENTION)
    assert decision.decision == "ESCALATE"
    assert "may still commit" in decision.reason


def test_inside_the_key_retention_not_found_re_sends_with_the_same_key(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    with pytest.raises(OutcomeUnknown):  # d1's request is in flight
        deliver(ledger, downstream, "d1", InFlight(downstream).send)
    decision = reconcile_refund(ledger, downstream, "reconcile", window=KEY_RETENTION)
    assert decision.decision == "RETRY"
    clock.advance(60)
    outcome = deliver(ledger, downstream, "d2", downstream.effect(REF), window=KEY_RETENTION)
    assert not outcome.reconciled and len(downstream.effects_for(REF)) == 1


def test_an_abandoned_lease_counts_as_a_possible_dispatch(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    """A worker that dies after sending leaves only its lease: once the provider's key window
    since that claim has passed, "not found" cannot allow a re-attempt."""
    held, existing = ledger.store.claim(REQUEST, attempt("crashed"))
    assert existing is None
    claimed_at = held.claimed_at
    clock.advance(KEY_RETENTION + 60)
    decision = reconcile_refund(ledger, downstream, "reconcile", window=KEY_RETENTION)
    assert decision.decision == "ESCALATE"
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.UNKNOWN
    assert record.first_dispatch_at == claimed_at
    assert downstream.effects_for(REF) == []


def test_a_lookup_that_sees_every_request_re_attempts_whenever_it_finds_nothing(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    """No window (a carrier whose lookup is read-after-write consistent and covers requests in
    flight): "not found" is proof, however late."""
    with pytest.raises(OutcomeUnknown):
        deliver(ledger, downstream, "d1", InFlight(downstream).send)
    clock.advance(3 * 86400)
    outcome = deliver(ledger, downstream, "d2", downstream.effect(REF))
    assert outcome.status == "COMPLETED" and len(downstream.effects_for(REF)) == 1


def test_an_open_record_outlives_any_retention_and_the_closed_one_counts_from_its_close(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock, policy: LedgerPolicy
) -> None:
    """Chained redrives must never meet a record that expired under them (§3.7): an open
    record carries no retention at all, and the closing write starts one."""
    retention = policy.retention_seconds
    failing = downstream.not_dispatched()
    for name in ("d1", "d2", "d3"):
        with pytest.raises(TransientError):
            deliver(ledger, downstream, name, failing)
        record = ledger.get(REQUEST.key)
        assert record is not None and record.expires_at is None
        clock.advance(retention * 0.75)  # the sum of the gaps is well past a retention
    outcome = deliver(ledger, downstream, "d4", downstream.effect(REF))
    assert outcome.status == "COMPLETED" and len(downstream.effects_for(REF)) == 1
    record = ledger.get(REQUEST.key)
    assert record is not None and record.expires_at == int(clock()) + retention


def test_reconciliation_settles_an_expired_record_and_renews_it(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock, policy: LedgerPolicy
) -> None:
    with pytest.raises(OutcomeUnknown):
        deliver(ledger, downstream, "d1", downstream.lose_response(REF))
    clock.advance(policy.retention_seconds + 1)

    decision = reconcile_refund(ledger, downstream, "reconcile-1")
    assert (decision.decision, decision.reason) == ("RESUME", "found at the downstream")
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.expires_at == int(clock()) + policy.retention_seconds

    clock.advance(policy.retention_seconds + 1)  # a COMPLETED record past its retention
    again = reconcile_refund(ledger, downstream, "reconcile-2")
    assert again.decision == "RESUME" and again.outcome is not None
    assert again.outcome.result == record.result
    assert len(downstream.effects_for(REF)) == 1


def test_a_delivery_long_after_an_unknown_outcome_looks_it_up_and_never_sends(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock, policy: LedgerPolicy
) -> None:
    with pytest.raises(OutcomeUnknown):
        deliver(ledger, downstream, "d1", downstream.lose_response(REF))
    clock.advance(policy.retention_seconds + 1)  # open: no retention, never deleted by TTL
    outcome = deliver(ledger, downstream, "d2", downstream.effect(REF))
    assert outcome.reconciled and len(downstream.effects_for(REF)) == 1
    record = ledger.get(REQUEST.key)
    assert record is not None and record.expires_at == int(clock()) + policy.retention_seconds


def test_a_stale_owner_cannot_write_over_the_live_new_owner(
    dynamodb: Any, ledger_table: str, policy: LedgerPolicy, clock: FakeClock
) -> None:
    """The outcome write is conditional on `owner = this attempt`, not only on the status: a
    delivery that lost its lease while the new owner is still IN_PROGRESS gets "lease lost" and
    leaves the record exactly as the new owner holds it."""
    observer = RecordingObserver()
    ledger = ActionLedger(ledger_table, dynamodb, policy, clock=clock, observer=observer)
    downstream = CountingDownstream()
    stale_may_write = threading.Event()
    new_owner_holds = threading.Event()
    new_owner_may_finish = threading.Event()
    stale_error: list[BaseException] = []

    def stale_effect() -> EffectResult:
        stale_may_write.wait(10)
        return downstream.refund(REF, 2000)

    def stale() -> None:
        try:
            deliver(ledger, downstream, "stale", stale_effect)
        except BaseException as exc:
            stale_error.append(exc)

    def new_owner_effect() -> EffectResult:
        new_owner_holds.set()
        new_owner_may_finish.wait(10)
        return downstream.refund(REF, 2000)

    stale_thread = threading.Thread(target=stale)
    stale_thread.start()
    while ledger.get(REQUEST.key) is None:
        threading.Event().wait(0.01)
    clock.advance(policy.lease_seconds(25) + 1)  # the stale owner stalls past its lease
    new_thread = threading.Thread(
        target=lambda: deliver(ledger, downstream, "new", new_owner_effect)
    )
    new_thread.start()
    assert new_owner_holds.wait(10)
    held = ledger.get(REQUEST.key)
    assert held is not None and (held.owner, held.status) == ("new", LedgerStatus.IN_PROGRESS)

    stale_may_write.set()
    stale_thread.join(10)
    assert len(stale_error) == 1 and isinstance(stale_error[0], OutcomeUnknown)
    assert "lease lost" in str(stale_error[0])
    untouched = ledger.get(REQUEST.key)
    assert untouched is not None
    assert (untouched.owner, untouched.status, untouched.result) == (
        "new",
        LedgerStatus.IN_PROGRESS,
        None,
    )
    assert untouched.item == held.item
    assert LedgerEvent.LEASE_LOST.value in observer.decisions

    new_owner_may_finish.set()
    new_thread.join(10)
    done = ledger.get(REQUEST.key)
    assert done is not None and (done.owner, done.status) == ("new", LedgerStatus.COMPLETED)


def test_decision_for_a_released_lease_depends_on_what_earlier_deliveries_may_have_sent(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    with pytest.raises(TransientError):
        deliver(ledger, downstream, "d1", downstream.not_dispatched())
    record = ledger.get(REQUEST.key)
    assert record is not None and record.first_dispatch_at is None
    row = decide(record, digest=REQUEST.digest, attempt_id="d2", now=clock(), budget=5)
    assert row is Decision.RESUME_RELEASED  # provably nothing sent: no lookup needed
