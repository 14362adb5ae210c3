"""Every row of the decision table (docs/design.md §3), against moto DynamoDB.

Each test delivers an action through `ActionLedger.execute` with a counting downstream and
asserts the number of real effects, the record left behind and the error raised.
"""

from __future__ import annotations

from typing import Any

import pytest

from saga.errors import (
    ActionPending,
    BudgetExhausted,
    KeyConflict,
    OutcomeUnknown,
    RefundRejected,
    TransientError,
)
from saga.ledger import (
    Absent,
    ActionLedger,
    Attempt,
    EffectResult,
    Found,
    LedgerPolicy,
    LedgerStatus,
)
from tests.integration.ledger_harness import (
    CountingDownstream,
    FakeClock,
    RecordingObserver,
    lose_responses,
    refund_request,
)

REMAINING = 60.0  # seconds left in the Lambda invocation


def attempt(attempt_id: str) -> Attempt:
    return Attempt(attempt_id, REMAINING)


@pytest.fixture
def raw_item(dynamodb: Any, ledger_table: str) -> Any:
    """The ledger item as stored (to see attributes the record type does not expose)."""

    def read(key: str) -> dict[str, Any]:
        response = dynamodb.get_item(
            TableName=ledger_table, Key={"action_key": {"S": key}}, ConsistentRead=True
        )
        return dict(response["Item"])

    return read


def deliver(
    ledger: ActionLedger, downstream: CountingDownstream, attempt_id: str, **kwargs: Any
) -> Any:
    request = kwargs.pop("request", refund_request())
    return ledger.execute(
        request,
        attempt(attempt_id),
        effect=kwargs.pop("effect", downstream.effect(request.action_id)),
        reconcile=kwargs.pop("reconcile", downstream.lookup(request.action_id)),
    )


def crash_after_claim(
    ledger: ActionLedger, attempt_id: str, request: Any = None, remaining: float = REMAINING
) -> None:
    """A delivery that claimed and then died (Lambda timeout, OOM): no outcome written."""

    class Crash(BaseException):
        pass

    def die() -> EffectResult:
        raise Crash

    with pytest.raises(Crash):
        ledger.execute(
            request or refund_request(),
            Attempt(attempt_id, remaining),
            effect=die,
            reconcile=lambda: pytest.fail("a fresh claim must not reconcile"),
        )


# --- nothing found: claimed ----------------------------------------------------------------
def test_first_delivery_claims_dispatches_once_and_records_the_result(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    observer: RecordingObserver,
    clock: FakeClock,
    raw_item: Any,
) -> None:
    request = refund_request()

    outcome = deliver(ledger, downstream, "exec#IssueRefund#0#0")

    assert len(downstream.effects) == 1
    assert outcome.result == downstream.effects[0]
    assert (outcome.replayed, outcome.reconciled, outcome.attempts) == (False, False, 1)
    assert outcome.downstream_ref == "rf-1"
    record = ledger.get(request.key)
    assert record is not None
    assert record.status is LedgerStatus.COMPLETED
    assert record.result == downstream.effects[0]
    assert record.owner == "exec#IssueRefund#0#0"
    assert record.request_digest == request.digest
    assert record.business_ref == request.action_id
    assert record.case_id == "case-0001"
    assert record.execution_arn == request.execution_arn
    assert record.expires_at == int(clock.now) + 7 * 86400
    assert "open_status" not in raw_item(request.key)
    assert observer.decisions == ["claimed", "completed"]


def test_lease_is_remaining_time_plus_margin_and_never_below_the_minimum(
    ledger: ActionLedger, clock: FakeClock, raw_item: Any
) -> None:
    crash_after_claim(ledger, "long")
    held = ledger.get(refund_request().key)
    assert held is not None
    assert held.lease_expires_at == clock.now + REMAINING + 30
    assert raw_item(held.action_key)["open_status"] == {"S": "IN_PROGRESS"}

    other = refund_request(case_id="case-0002")
    crash_after_claim(ledger, "short", other, remaining=0.0)  # no time left: margin only
    record = ledger.get(other.key)
    assert record is not None
    assert record.lease_expires_at == clock.now + 30
    assert LedgerPolicy(lease_margin_seconds=0, min_lease_seconds=5).lease_seconds(1.0) == 5.0


# --- digest differs: conflict ---------------------------------------------------------------
@pytest.mark.parametrize("state", ["completed", "failed", "in_progress", "unknown"])
def test_same_key_with_changed_parameters_is_rejected_and_nothing_dispatched(
    state: str, ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    original = refund_request(amount_minor=2000)
    if state == "completed":
        deliver(ledger, downstream, "first", request=original)
    elif state == "failed":
        with pytest.raises(RefundRejected):
            deliver(ledger, downstream, "first", request=original, effect=_rejected)
    elif state == "in_progress":
        crash_after_claim(ledger, "first", original)
    else:
        with pytest.raises(OutcomeUnknown):
            deliver(
                ledger, downstream, "first", effect=downstream.lose_response(original.action_id)
            )
    effects_before = len(downstream.effects)
    before = ledger.get(original.key)
    changed = refund_request(amount_minor=2500)
    assert changed.key == original.key

    with pytest.raises(KeyConflict, match="different parameters"):
        deliver(
            ledger,
            downstream,
            "second",
            request=changed,
            reconcile=lambda: pytest.fail("a conflict must not reconcile"),
        )

    assert len(downstream.effects) == effects_before
    assert ledger.get(original.key) == before


def test_a_changed_approval_revision_is_a_conflict(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    deliver(ledger, downstream, "first", request=refund_request(revision=1))
    with pytest.raises(KeyConflict):
        deliver(ledger, downstream, "second", request=refund_request(revision=2))
    assert len(downstream.effects) == 1


# --- COMPLETED: replay ---------------------------------------------------------------------
def test_lost_lambda_response_retried_returns_original_result_without_second_effect(
    ledger: ActionLedger, downstream: CountingDownstream, observer: RecordingObserver
) -> None:
    first = deliver(ledger, downstream, "exec#IssueRefund#0#0")
    # the workflow never saw `first` and retries: new attempt id, same action key
    again = deliver(ledger, downstream, "exec#IssueRefund#0#1")

    assert len(downstream.effects) == 1
    assert again.result == first.result
    assert again.downstream_ref == first.downstream_ref
    assert (again.replayed, again.attempts) == (True, 1)
    assert observer.decisions[-1] == "replayed"


def test_two_separately_approved_identical_refunds_are_two_effects(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    first = refund_request(case_id="case-0001", amount_minor=2000)
    second = refund_request(case_id="case-0002", amount_minor=2000)
    assert first.digest == second.digest  # identical parameters ...
    assert first.key != second.key  # ... but two approved actions

    one = deliver(ledger, downstream, "a", request=first)
    two = deliver(ledger, downstream, "b", request=second)

    assert len(downstream.effects) == 2
    assert one.result != two.result
    assert not one.replayed and not two.replayed


# --- FAILED: raise the recorded failure ----------------------------------------------------
def test_recorded_permanent_failure_is_raised_again_without_dispatch(
    ledger: ActionLedger, downstream: CountingDownstream, raw_item: Any
) -> None:
    with pytest.raises(RefundRejected, match="card closed"):
        deliver(ledger, downstream, "first", effect=_rejected)
    record = ledger.get(refund_request().key)
    assert record is not None
    assert record.status is LedgerStatus.FAILED
    assert record.error == {"type": "RefundRejected", "message": "card closed"}
    assert "open_status" not in raw_item(record.action_key)

    with pytest.raises(RefundRejected, match=r"^card closed$"):
        deliver(ledger, downstream, "second")
    assert downstream.effects == []


# --- IN_PROGRESS, owner = this attempt ------------------------------------------------------
def test_sdk_retry_of_a_claim_whose_response_was_lost_proceeds_as_own_claim(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    dynamodb: Any,
    observer: RecordingObserver,
) -> None:
    with lose_responses(dynamodb, "PutItem") as lost:
        outcome = deliver(ledger, downstream, "exec#IssueRefund#0#0")

    assert lost == [1]
    assert observer.decisions == ["own_claim", "completed"]
    assert len(downstream.effects) == 1
    assert outcome.attempts == 1 and not outcome.replayed


def test_sdk_retry_of_a_completion_whose_response_was_lost_is_our_own_write(
    ledger: ActionLedger, downstream: CountingDownstream, dynamodb: Any
) -> None:
    with lose_responses(dynamodb, "UpdateItem") as lost:
        outcome = deliver(ledger, downstream, "exec#IssueRefund#0#0")

    assert lost == [1]
    assert len(downstream.effects) == 1
    assert outcome.result == downstream.effects[0]
    record = ledger.get(refund_request().key)
    assert record is not None and record.status is LedgerStatus.COMPLETED


# --- IN_PROGRESS, live lease, other owner: pending -----------------------------------------
def test_live_lease_of_another_attempt_is_pending_and_changes_nothing(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    crash_after_claim(ledger, "owner")
    before = ledger.get(refund_request().key)
    clock.advance(REMAINING + 29)  # still inside the lease

    with pytest.raises(ActionPending, match="held by another attempt"):
        deliver(ledger, downstream, "other", reconcile=lambda: pytest.fail("no reconcile"))

    assert downstream.effects == []
    assert ledger.get(refund_request().key) == before


# --- IN_PROGRESS, lease expired: takeover, reconcile first ---------------------------------
def test_expired_lease_after_a_dispatched_effect_reconciles_instead_of_re_executing(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    clock: FakeClock,
    observer: RecordingObserver,
    raw_item: Any,
) -> None:
    request = refund_request()

    class Crash(BaseException):
        pass

    def dispatch_then_die() -> EffectResult:
        downstream.refund(request.action_id, 2000)
        raise Crash  # the Lambda timed out before recording

    with pytest.raises(Crash):
        deliver(ledger, downstream, "first", effect=dispatch_then_die)
    clock.advance(REMAINING + 31)

    outcome = deliver(ledger, downstream, "second")

    assert len(downstream.effects) == 1
    assert downstream.lookups == 1
    assert outcome.reconciled and not outcome.replayed
    assert outcome.result == downstream.effects[0]
    assert outcome.attempts == 2
    record = ledger.get(request.key)
    assert record is not None
    assert (record.status, record.owner, record.attempts) == (LedgerStatus.COMPLETED, "second", 2)
    assert "open_status" not in raw_item(request.key)
    assert observer.decisions[-3:] == ["takeover", "completed", "reconciled"]


def test_expired_lease_with_no_effect_found_dispatches_once_with_the_same_key(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    crash_after_claim(ledger, "first")
    clock.advance(REMAINING + 31)

    outcome = deliver(ledger, downstream, "second")

    assert downstream.lookups == 1
    assert len(downstream.effects) == 1
    assert not outcome.reconciled and outcome.attempts == 2


def test_expired_lease_that_cannot_be_reconciled_becomes_unknown_without_dispatch(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    clock: FakeClock,
    raw_item: Any,
) -> None:
    crash_after_claim(ledger, "first")
    clock.advance(REMAINING + 31)

    with pytest.raises(OutcomeUnknown, match="cannot be determined"):
        deliver(ledger, downstream, "second", reconcile=downstream.cannot_tell())

    assert downstream.effects == []
    record = ledger.get(refund_request().key)
    assert record is not None
    assert (record.status, record.owner, record.attempts) == (LedgerStatus.UNKNOWN, "second", 2)
    assert raw_item(record.action_key)["open_status"] == {"S": "UNKNOWN"}


def test_a_takeover_race_has_one_winner(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock, policy: LedgerPolicy
) -> None:
    """Two deliveries both see the same expired lease; only one conditional takeover wins."""
    crash_after_claim(ledger, "first")
    clock.advance(REMAINING + 31)
    stale = ledger.get(refund_request().key)
    assert stale is not None

    deliver(ledger, downstream, "winner")  # takes over, reconciles Absent, dispatches
    taken, current = ledger.store.take_over(refund_request(), attempt("loser"), stale)

    assert taken is None
    assert current is not None and current.owner == "winner"
    assert current.status is LedgerStatus.COMPLETED
    assert len(downstream.effects) == 1


# --- UNKNOWN: reconcile first ---------------------------------------------------------------
def test_unknown_outcome_is_reconciled_before_anything_is_re_dispatched(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    request = refund_request()
    with pytest.raises(OutcomeUnknown, match="timed out"):
        deliver(ledger, downstream, "first", effect=downstream.lose_response(request.action_id))
    unknown = ledger.get(request.key)
    assert unknown is not None and unknown.status is LedgerStatus.UNKNOWN
    assert unknown.error == {
        "type": "OutcomeUnknown",
        "message": "refund call timed out after sending",
    }

    outcome = deliver(ledger, downstream, "second")  # no live lease needed to expire

    assert len(downstream.effects) == 1
    assert outcome.reconciled and outcome.result == downstream.effects[0]
    record = ledger.get(request.key)
    assert record is not None and record.status is LedgerStatus.COMPLETED and record.error is None


def test_an_unexpected_effect_error_is_recorded_unknown_and_raised_as_outcome_unknown(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    def broken() -> EffectResult:
        raise ConnectionResetError("peer reset")

    with pytest.raises(OutcomeUnknown, match="ConnectionResetError: peer reset") as raised:
        deliver(ledger, downstream, "first", effect=broken)

    assert isinstance(raised.value.__cause__, ConnectionResetError)
    record = ledger.get(refund_request().key)
    assert record is not None and record.status is LedgerStatus.UNKNOWN


# --- TransientError: lease given up, next delivery dispatches ------------------------------
def test_transient_error_gives_the_lease_up_and_the_next_delivery_dispatches(
    ledger: ActionLedger, downstream: CountingDownstream, observer: RecordingObserver
) -> None:
    with pytest.raises(TransientError):
        deliver(ledger, downstream, "first", effect=downstream.not_dispatched())
    released = ledger.get(refund_request().key)
    assert released is not None
    assert (released.status, released.owner, released.attempts) == (
        LedgerStatus.IN_PROGRESS,
        None,
        1,
    )

    outcome = deliver(ledger, downstream, "second")  # no clock jump needed: nobody holds it

    assert len(downstream.effects) == 1
    assert downstream.lookups == 0  # "nothing happened" needs no reconciliation
    assert outcome.attempts == 2
    assert "resume_released" in observer.decisions


# --- expires_at passed: late replay ---------------------------------------------------------
def test_a_completed_record_past_its_retention_is_replayed_never_executed(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    clock: FakeClock,
    observer: RecordingObserver,
) -> None:
    first = deliver(ledger, downstream, "first")
    clock.advance(7 * 86400 + 1)  # moto, like DynamoDB for days, has not deleted the item

    late = deliver(ledger, downstream, "late", reconcile=lambda: pytest.fail("no reconcile"))

    assert late.replayed and late.result == first.result
    assert len(downstream.effects) == 1
    assert observer.decisions[-1] == "replayed"


@pytest.mark.parametrize("dispatched", [False, True])
def test_an_open_record_the_previous_version_gave_a_retention_is_looked_up_once_past_it(  # noqa: PLR0917
    dispatched: bool,
    ledger: ActionLedger,
    downstream: CountingDownstream,
    clock: FakeClock,
    observer: RecordingObserver,
    dynamodb: Any,
    ledger_table: str,
    raw_item: Any,
) -> None:
    """Records written before open ones stopped carrying a retention (§3.7) may still expire:
    past it, TTL may delete one under the delivery, so it is never acted on blind. The delivery
    takes it over (which removes the retention: open records never expire) and asks first."""
    if dispatched:  # the crashed delivery had sent the refund
        downstream.refund(refund_request().action_id, 2000)
    crash_after_claim(ledger, "first")
    key = refund_request().key
    dynamodb.update_item(  # as the previous version wrote it: a retention on an open record
        TableName=ledger_table,
        Key={"action_key": {"S": key}},
        UpdateExpression="SET expires_at = :at",
        ExpressionAttributeValues={":at": {"N": str(int(clock()) + 7 * 86400)}},
    )
    clock.advance(7 * 86400 + 1)  # moto, like DynamoDB for days, has not deleted the item

    outcome = deliver(ledger, downstream, "late")

    assert "late_replay" in observer.decisions
    assert downstream.lookups == 1  # before anything was sent
    assert len(downstream.effects) == 1  # one refund, whoever made it
    assert outcome.reconciled is dispatched
    record = raw_item(key)
    assert record["status"]["S"] == "COMPLETED"
    assert int(record["expires_at"]["N"]) == ledger.policy.expires_at(clock())  # closed now


def lost_response() -> EffectResult:
    raise OutcomeUnknown("the provider timed out")


def test_an_open_record_never_carries_a_retention_and_a_closed_one_does(
    ledger: ActionLedger, clock: FakeClock, raw_item: Any
) -> None:
    """§3.7: the claim, a takeover and an UNKNOWN outcome leave a record open and without
    `expires_at` (TTL never deletes an action nobody settled); the closing write sets it."""
    request = refund_request()
    crash_after_claim(ledger, "first", request)
    assert "expires_at" not in raw_item(request.key)
    clock.advance(3600)  # the lease is long gone

    class Crash(BaseException):
        pass

    def die() -> EffectResult:
        raise Crash

    with pytest.raises(Crash):  # the second delivery takes over, looks up first, then dies
        ledger.execute(request, attempt("second"), effect=die, reconcile=Absent)
    taken = raw_item(request.key)
    assert (taken["status"]["S"], taken["attempts"]["N"]) == ("IN_PROGRESS", "2")
    assert "expires_at" not in taken

    clock.advance(3600)
    with pytest.raises(OutcomeUnknown):
        ledger.execute(request, attempt("third"), effect=lost_response, reconcile=Absent)
    unknown = raw_item(request.key)
    assert unknown["status"]["S"] == "UNKNOWN" and "expires_at" not in unknown

    closed = ledger.reconcile(
        request, attempt("reconciler"), reconcile=lambda: Found({"refund_id": "rf-1"}, "rf-1")
    )
    assert closed.decision == "RESUME"
    record = raw_item(request.key)
    assert record["status"]["S"] == "COMPLETED"
    assert int(record["expires_at"]["N"]) == ledger.policy.expires_at(clock())


# --- budget ---------------------------------------------------------------------------------
def test_budget_survives_a_redrive_that_resets_the_workflow_retry_counter(
    dynamodb: Any,
    ledger_table: str,
    downstream: CountingDownstream,
    clock: FakeClock,
    observer: RecordingObserver,
) -> None:
    ledger = ActionLedger(
        ledger_table, dynamodb, LedgerPolicy(attempt_budget=5), clock=clock, observer=observer
    )
    request = refund_request()
    provider_calls: list[str] = []

    def unavailable() -> EffectResult:
        provider_calls.append("refund")  # reached the provider, refused before commit
        raise TransientError("provider unavailable")

    delivered: list[str] = []
    outcomes: list[type[Exception]] = []
    # Retry MaxAttempts=2 => 3 deliveries per run; redrive resets that counter, not the ledger's
    for redrive in range(2):
        for retry in range(3):
            attempt_id = f"arn:exec:case-0001#IssueRefund#{redrive}#{retry}"
            delivered.append(attempt_id)
            with pytest.raises((TransientError, BudgetExhausted)) as raised:
                deliver(ledger, downstream, attempt_id, request=request, effect=unavailable)
            outcomes.append(type(raised.value))

    assert outcomes == [TransientError] * 5 + [BudgetExhausted]
    assert len(provider_calls) == 5  # the sixth delivery (redrive 1, retry 2) never dispatched
    record = ledger.get(request.key)
    assert record is not None and record.attempts == 5
    assert observer.decisions[-1] == "budget_exhausted"


@pytest.mark.parametrize("dispatched", [False, True])
def test_budget_exhausted_on_takeover_looks_up_but_never_dispatches(  # noqa: PLR0917
    dispatched: bool,
    dynamodb: Any,
    ledger_table: str,
    downstream: CountingDownstream,
    clock: FakeClock,
    observer: RecordingObserver,
) -> None:
    """With the budget spent nothing is sent again; a lookup has no effect, so it still settles
    an action that did happen (a compensation can then finish instead of failing for good)."""
    ledger = ActionLedger(
        ledger_table, dynamodb, LedgerPolicy(attempt_budget=1), clock=clock, observer=observer
    )
    if dispatched:
        downstream.refund(refund_request().action_id, 2000)
    crash_after_claim(ledger, "first")
    clock.advance(REMAINING + 31)

    if dispatched:
        outcome = deliver(ledger, downstream, "second")
        assert outcome.reconciled and outcome.attempts == 1
    else:
        with pytest.raises(BudgetExhausted):
            deliver(ledger, downstream, "second")

    assert downstream.lookups == 1
    assert len(downstream.effects) == int(dispatched)  # nothing sent by the second delivery
    record = ledger.get(refund_request().key)
    assert record is not None and record.attempts == 1
    assert record.status is (LedgerStatus.COMPLETED if dispatched else LedgerStatus.IN_PROGRESS)


# --- a worker that lost its lease never overwrites the new owner ---------------------------
def test_attempt_that_outlived_its_lease_cannot_overwrite_the_new_owner(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    request = refund_request()
    takeover: list[Any] = []

    def slow_effect() -> EffectResult:
        done = downstream.refund(request.action_id, 2000)
        clock.advance(REMAINING + 31)  # this attempt stalls past its lease ...
        takeover.append(deliver(ledger, downstream, "second"))  # ... and is taken over
        return done

    with pytest.raises(OutcomeUnknown, match="lease lost"):
        deliver(ledger, downstream, "first", effect=slow_effect)

    assert len(downstream.effects) == 1
    assert takeover[0].reconciled
    record = ledger.get(request.key)
    assert record is not None
    assert (record.status, record.owner) == (LedgerStatus.COMPLETED, "second")
    assert record.result == downstream.effects[0]


def test_failure_of_an_attempt_that_lost_its_lease_is_not_recorded(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    def slow_rejection() -> EffectResult:
        clock.advance(REMAINING + 31)
        deliver(ledger, downstream, "second")
        raise RefundRejected("too late")

    with pytest.raises(OutcomeUnknown, match="lease lost"):
        deliver(ledger, downstream, "first", effect=slow_rejection)

    record = ledger.get(refund_request().key)
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.error is None


# --- the sparse GSI lists only open actions -------------------------------------------------
def test_open_actions_index_lists_only_in_progress_and_unknown(
    ledger: ActionLedger, downstream: CountingDownstream, dynamodb: Any, ledger_table: str
) -> None:
    deliver(ledger, downstream, "a", request=refund_request(case_id="done"))
    crash_after_claim(ledger, "b", refund_request(case_id="held"))
    with pytest.raises(OutcomeUnknown):
        deliver(
            ledger,
            downstream,
            "c",
            request=refund_request(case_id="unsure"),
            effect=downstream.lose_response("unsure.refund"),
        )
    with pytest.raises(RefundRejected):
        deliver(ledger, downstream, "d", request=refund_request(case_id="no"), effect=_rejected)

    def open_keys(status: str) -> set[str]:
        items = dynamodb.query(
            TableName=ledger_table,
            IndexName="open-actions",
            KeyConditionExpression="open_status = :s",
            ExpressionAttributeValues={":s": {"S": status}},
        )["Items"]
        return {item["action_key"]["S"] for item in items}

    assert open_keys("IN_PROGRESS") == {"acme#refund#held.refund"}
    assert open_keys("UNKNOWN") == {"acme#refund#unsure.refund"}


# --- helpers --------------------------------------------------------------------------------
def _rejected() -> EffectResult:
    raise RefundRejected("card closed")


def test_sdk_retry_of_a_takeover_whose_response_was_lost_still_reconciles_first(
    ledger: ActionLedger, downstream: CountingDownstream, dynamodb: Any
) -> None:
    """Found by the stateful test: a retried takeover sees itself as owner; it must not be
    mistaken for an own claim (which dispatches) and must reconcile first."""
    request = refund_request()
    with pytest.raises(OutcomeUnknown):
        deliver(ledger, downstream, "first", effect=downstream.lose_response(request.action_id))

    with lose_responses(dynamodb, "UpdateItem") as lost:
        outcome = deliver(ledger, downstream, "second")

    assert lost == [1]
    assert len(downstream.effects) == 1
    assert outcome.reconciled and outcome.attempts == 2
