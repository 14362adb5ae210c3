"""`ActionLedger.settle`: a person's decision on an open action ends the automation's part.

Against moto's DynamoDB with the real ledger table and its sparse `open-actions` index: the
settled record keeps its status, leaves the index (the sweeper stops re-sending it), never
expires, and no later delivery (a redrive, a late retry, a takeover decided before the
decision) dispatches or writes anything; reconciliation is refused without a lookup. An action
with no record is settled by a SETTLED record, in the same transaction as the case's
resolution (`settle_case_writes`): a claim that comes after it, whenever its delivery read the
case record, meets the decision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from saga.errors import (
    ActionPending,
    ActionSettled,
    OutcomeUnknown,
    RefundRejected,
    TransientError,
)
from saga.ledger import (
    Absent,
    ActionLedger,
    ActionRequest,
    Attempt,
    EffectResult,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
    Resolution,
)
from saga.ledger.records import SETTLE_SKEW_SECONDS
from saga.tools.sweeper import StuckActionSweeper
from tests.integration.ledger_harness import CountingDownstream, FakeClock, refund_request

REQUEST = refund_request("case-settled")
REF = REQUEST.action_id
DECIDED = Resolution(
    by="supervisor@acme", decision="refunded by hand at the provider", at="2023-11-14T22:20:00Z"
)


def _unknown(ledger: ActionLedger, downstream: CountingDownstream, request: ActionRequest) -> None:
    """A delivery whose refund committed but whose answer was lost: UNKNOWN, open."""
    with pytest.raises(OutcomeUnknown):
        ledger.execute(
            request,
            Attempt("attempt-1", 30),
            effect=downstream.lose_response(request.action_id),
            reconcile=downstream.lookup(request.action_id),
        )


def _released(ledger: ActionLedger, downstream: CountingDownstream) -> None:
    """A delivery that provably sent nothing: IN_PROGRESS, lease given back, open."""
    with pytest.raises(TransientError):
        ledger.execute(
            REQUEST,
            Attempt("attempt-1", 30),
            effect=downstream.not_dispatched(),
            reconcile=downstream.lookup(REF),
        )


def _deliver_refund(ledger: ActionLedger, downstream: CountingDownstream, attempt_id: str) -> None:
    """A delivery of the refund that would refund, if the ledger let it send."""
    ledger.execute(
        REQUEST,
        Attempt(attempt_id, 30),
        effect=downstream.effect(REF),
        reconcile=downstream.lookup(REF),
    )


RawRecord = Callable[[str], dict[str, Any]]


@pytest.fixture
def raw(dynamodb: Any, ledger_table: str) -> RawRecord:
    """The record's item as stored (every attribute, for "nothing was written" checks)."""

    def read(key: str) -> dict[str, Any]:
        item: dict[str, Any] = dynamodb.get_item(
            TableName=ledger_table, Key={"action_key": {"S": key}}, ConsistentRead=True
        )["Item"]
        return item

    return read


@pytest.fixture
def sweeper(dynamodb: Any, ledger_table: str, clock: FakeClock, moto_aws: None) -> Any:
    queue = boto3.client("sqs").create_queue(QueueName="escalation")["QueueUrl"]
    return StuckActionSweeper(
        dynamodb=dynamodb,
        sqs=boto3.client("sqs"),
        ledger_table=ledger_table,
        escalation_queue_url=queue,
        grace_seconds=0,
        clock=clock,
    )


def test_a_settled_unknown_keeps_its_status_and_leaves_the_sweepers_index(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    sweeper: StuckActionSweeper,
    clock: FakeClock,
    raw: RawRecord,
) -> None:
    _unknown(ledger, downstream, REQUEST)
    clock.advance(1)
    assert [a.action_key for a in sweeper.find_stuck()] == [REQUEST.key]
    before = ledger.get(REQUEST.key)
    assert before is not None

    settled = ledger.settle(REQUEST.key, DECIDED)

    assert settled is not None
    assert settled.status is LedgerStatus.UNKNOWN  # the system still does not know
    assert settled.resolution == DECIDED.to_record()
    assert (settled.attempts, settled.owner, settled.lease_expires_at) == (
        before.attempts,
        before.owner,
        before.lease_expires_at,
    )
    stored = raw(REQUEST.key)
    assert "open_status" not in stored  # out of the sparse index
    assert "expires_at" not in stored  # TTL never deletes a person's decision
    assert sweeper.find_stuck() == []
    assert sweeper.sweep().escalated == 0


def test_a_delivery_after_the_decision_dispatches_nothing_and_writes_nothing(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    clock: FakeClock,
    policy: LedgerPolicy,
    raw: RawRecord,
) -> None:
    _unknown(ledger, downstream, REQUEST)
    ledger.settle(REQUEST.key, DECIDED)
    settled = raw(REQUEST.key)
    # Past the lease, the retention and far from the budget: none of it reopens the action.
    clock.advance(policy.retention_seconds + 60)

    with pytest.raises(ActionSettled, match="settled by supervisor@acme") as raised:
        _deliver_refund(ledger, downstream, "redrive-1")

    # Who and when, never the decision's text: case data stays out of errors and logs.
    assert "refunded by hand" not in raised.value.message
    assert len(downstream.effects) == 1  # the one the lost response hid, nothing more
    assert downstream.lookups == 0
    assert raw(REQUEST.key) == settled


def test_a_settled_released_lease_is_not_resumed(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    raw: RawRecord,
) -> None:
    _released(ledger, downstream)
    record = ledger.settle(REQUEST.key, DECIDED)
    assert record is not None and record.status is LedgerStatus.IN_PROGRESS
    settled = raw(REQUEST.key)

    with pytest.raises(ActionSettled):
        _deliver_refund(ledger, downstream, "late-retry")

    assert downstream.effects == []
    assert raw(REQUEST.key) == settled


def test_a_native_transaction_after_the_decision_commits_nothing(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    raw: RawRecord,
) -> None:
    _released(ledger, downstream)
    ledger.settle(REQUEST.key, DECIDED)
    settled = raw(REQUEST.key)
    # The effect item rides in the same transaction as the ledger record (ReserveStock's way).
    effect = {
        "Put": {
            "TableName": ledger.table_name,
            "Item": {"action_key": {"S": "effect-of-the-transaction"}},
        }
    }

    with pytest.raises(ActionSettled):
        ledger.execute_transaction(
            REQUEST,
            Attempt("redrive-1", 30),
            effect_items=[effect],  # type: ignore[list-item]
            result={"ok": True},
            explain_failure=lambda failed: TransientError(str(failed)),
        )

    assert ledger.get("effect-of-the-transaction") is None
    assert raw(REQUEST.key) == settled


def test_reconciliation_of_a_settled_action_is_refused_without_a_lookup(
    ledger: ActionLedger,
    downstream: CountingDownstream,
    raw: RawRecord,
) -> None:
    """Not ESCALATE: the case is resolved, and escalating it again would leave a message on
    the queue for a decision already made (§3.8, §3.10)."""
    _released(ledger, downstream)  # a reconcile would answer RETRY here (provably absent)
    ledger.settle(REQUEST.key, DECIDED)
    settled = raw(REQUEST.key)

    with pytest.raises(ActionSettled, match="settled by supervisor@acme"):
        ledger.reconcile(REQUEST, Attempt("reconciler", 30), reconcile=downstream.lookup(REF))

    assert downstream.lookups == 0
    assert raw(REQUEST.key) == settled


def test_a_takeover_decided_before_the_decision_does_not_land_on_it(
    dynamodb: Any,
    ledger_table: str,
    policy: LedgerPolicy,
    clock: FakeClock,
    downstream: CountingDownstream,
) -> None:
    """The race: a delivery reads the open record, a person settles it, the delivery's
    takeover (conditional on the record as it read it) must fail and decide again."""
    delivery = ActionLedger(ledger_table, dynamodb, policy, clock=clock)
    person = ActionLedger(ledger_table, boto3.client("dynamodb"), policy, clock=clock)
    _unknown(delivery, downstream, REQUEST)
    settled_first = [False]

    def settle_before_the_takeover(params: dict[str, Any], **_: Any) -> None:
        takeover = "attempts = attempts + :one" in params.get("UpdateExpression", "")
        if takeover and not settled_first[0]:
            settled_first[0] = True
            person.settle(REQUEST.key, DECIDED)

    event = "before-parameter-build.dynamodb.UpdateItem"
    dynamodb.meta.events.register(event, settle_before_the_takeover)
    try:
        with pytest.raises(ActionSettled):
            _deliver_refund(delivery, downstream, "redrive-1")
    finally:
        dynamodb.meta.events.unregister(event, settle_before_the_takeover)

    assert settled_first[0]
    assert len(downstream.effects) == 1 and downstream.lookups == 0
    record = delivery.get(REQUEST.key)
    assert record is not None and record.resolution == DECIDED.to_record()
    assert (record.status, record.attempts, record.owner) == (
        LedgerStatus.UNKNOWN,
        1,
        "attempt-1",
    )


class WorkerCrashed(BaseException):
    """A Lambda that died mid-effect: nothing after the claim runs, the lease stays."""


def _crash() -> Any:
    raise WorkerCrashed


def test_settle_refuses_a_live_attempt_a_second_decision_and_leaves_closed_records(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    held = refund_request("case-held")
    done = refund_request("case-done")
    ledger.execute(
        done,
        Attempt("a", 30),
        effect=downstream.effect(done.action_id),
        reconcile=downstream.lookup(done.action_id),
    )
    with contextlib.suppress(WorkerCrashed):
        ledger.execute(held, Attempt("a", 30), effect=_crash, reconcile=downstream.lookup("x"))

    with pytest.raises(ActionPending, match="held by attempt a until"):
        ledger.settle(held.key, DECIDED)
    completed = ledger.get(done.key)
    assert ledger.settle(done.key, DECIDED) == completed  # nothing open to settle
    assert ledger.settle("acme#refund#no-such-case.refund", DECIDED) is None

    clock.advance(120)  # the crashed attempt's lease has run out, but not the skew allowance
    with pytest.raises(ActionPending, match=r"can be settled from .* 15 minutes for the clocks'"):
        ledger.settle(held.key, DECIDED)
    clock.advance(SETTLE_SKEW_SECONDS)
    first = ledger.settle(held.key, DECIDED)
    assert isinstance(first, LedgerRecord) and first.resolution == DECIDED.to_record()
    other = Resolution(by="ops@acme", decision="something else", at="2023-11-15T00:00:00Z")
    with pytest.raises(ActionSettled, match="cannot be settled twice"):
        ledger.settle(held.key, other)
    assert ledger.get(held.key) == first


# --- actions without a record: settled by a SETTLED record (§3.10) -------------------------------
def _settle_case(ledger: ActionLedger, keys: dict[str, str]) -> list[str]:
    """The ledger's part of `resolve`: the writes, committed as one transaction."""
    writes = ledger.settle_case_writes(keys, DECIDED, case_id="case-settled")
    if writes:
        ledger.store.transact([write for _, write in writes])
    return [key for key, _ in writes]


def test_an_action_without_a_record_is_settled_by_a_settled_record(
    ledger: ActionLedger, downstream: CountingDownstream, raw: RawRecord
) -> None:
    assert ledger.get(REQUEST.key) is None
    assert _settle_case(ledger, {"refund": REQUEST.key}) == [REQUEST.key]
    record = ledger.get(REQUEST.key)
    assert record is not None
    assert (record.status, record.request_digest, record.attempts) == (
        LedgerStatus.SETTLED,
        None,
        0,
    )
    assert record.resolution == DECIDED.to_record()
    stored = raw(REQUEST.key)
    assert not {"expires_at", "open_status", "owner", "request_digest"} & set(stored)

    # The first claim ever comes after the decision: refused, nothing sent, nothing written.
    with pytest.raises(ActionSettled, match="settled by supervisor@acme"):
        _deliver_refund(ledger, downstream, "late-1")
    other = refund_request("case-settled", amount_minor=9999)  # any digest: no conflict
    with pytest.raises(ActionSettled):
        ledger.execute(
            other, Attempt("late-2", 30), effect=downstream.effect(REF), reconcile=Absent
        )
    with pytest.raises(ActionSettled):
        ledger.execute_transaction(
            REQUEST,
            Attempt("late-3", 30),
            effect_items=[],
            result={"ok": True},
            explain_failure=lambda failed: TransientError(str(failed)),
        )
    with pytest.raises(ActionSettled):
        ledger.reconcile(REQUEST, Attempt("reconciler", 30), reconcile=downstream.lookup(REF))
    assert downstream.effects == [] and downstream.lookups == 0
    assert raw(REQUEST.key) == stored


def test_a_claim_between_the_read_and_the_resolution_fails_the_resolution(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    """The settlement is conditional on the record as read (none): a delivery that claims in
    between wins, and the resolution writes nothing (resolve reads again and decides anew)."""
    writes = ledger.settle_case_writes({"refund": REQUEST.key}, DECIDED, case_id="case-settled")
    _deliver_refund(ledger, downstream, "in-between")

    with pytest.raises(ClientError) as cancelled:
        ledger.store.transact([write for _, write in writes])

    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    record = ledger.get(REQUEST.key)
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.resolution is None and len(downstream.effects) == 1


def test_the_case_settlement_leaves_closed_and_settled_records_and_waits_for_a_live_one(
    ledger: ActionLedger, downstream: CountingDownstream, clock: FakeClock
) -> None:
    missing = refund_request("case-missing")  # no record
    _deliver_refund(ledger, downstream, "a")  # REQUEST: COMPLETED
    held = refund_request("case-held")
    with contextlib.suppress(WorkerCrashed):
        ledger.execute(held, Attempt("a", 30), effect=_crash, reconcile=downstream.lookup("x"))
    keys = {"refund": REQUEST.key, "ship": missing.key, "release": held.key}

    with pytest.raises(ActionPending, match="held by attempt a"):
        ledger.settle_case_writes(keys, DECIDED, case_id="case-settled")

    clock.advance(120 + SETTLE_SKEW_SECONDS)  # the crashed attempt's lease, and the allowance
    assert _settle_case(ledger, keys) == [missing.key, held.key]
    assert _settle_case(ledger, keys) == []  # settled, closed: nothing left to settle
    completed = ledger.get(REQUEST.key)
    assert completed is not None and completed.resolution is None  # a closed record stays
    release = ledger.get(held.key)
    assert release is not None and release.status is LedgerStatus.IN_PROGRESS
    assert release.resolution == DECIDED.to_record()


# --- a person's clock is not the Lambda's (§3.10) --------------------------------------------
CDK_POLICY = LedgerPolicy(
    attempt_budget=8, retention_seconds=30 * 86400, lease_margin_seconds=10, min_lease_seconds=5
)


def test_a_resolution_on_a_fast_clock_does_not_settle_an_action_a_live_delivery_holds(
    dynamodb: Any, ledger_table: str, clock: FakeClock
) -> None:
    """A delivery claims the refund with 30 s left in its Lambda (lease: 30 s + cdk.json's
    10 s margin); 25 s later, about to send, an operator whose laptop runs 16 s fast resolves
    the case. On that clock the lease ended 1 s ago: without the skew allowance the action was
    settled, then refunded."""
    downstream = CountingDownstream()
    lambda_ledger = ActionLedger(ledger_table, dynamodb, CDK_POLICY, clock=clock)
    operator = ActionLedger(ledger_table, dynamodb, CDK_POLICY, clock=lambda: clock() + 16)
    refused: list[str] = []

    def effect() -> EffectResult:
        clock.advance(25)  # the delivery is still running: 5 s left of its Lambda's 30
        with pytest.raises(ActionPending, match="can be settled from") as pending:
            operator.settle(REQUEST.key, DECIDED)
        refused.append(pending.value.message)
        return downstream.refund(REF, 2000)

    lambda_ledger.execute(
        REQUEST, Attempt("attempt-1", 30), effect=effect, reconcile=downstream.lookup(REF)
    )
    record = lambda_ledger.get(REQUEST.key)
    assert record is not None and len(refused) == 1
    assert (record.status, record.resolution) == (LedgerStatus.COMPLETED, None)
    assert len(downstream.effects) == 1


@pytest.mark.parametrize("ends", ["refunds", "loses_the_answer", "is_rejected"])
def test_an_outcome_on_an_action_settled_meanwhile_is_recorded_with_the_decision(
    dynamodb: Any, ledger_table: str, clock: FakeClock, raw: RawRecord, ends: str
) -> None:
    """A clock further off than the allowance (AWS would refuse its requests: this is the
    backstop) settles the action while its delivery is about to send. What the delivery then
    learns is recorded all the same (never lose an effect's record), next to the decision: no
    retention, not back in the sweeper's index; and the delivery stops with ActionSettled."""
    downstream = CountingDownstream()
    lambda_ledger = ActionLedger(ledger_table, dynamodb, CDK_POLICY, clock=clock)
    far_off = ActionLedger(
        ledger_table, dynamodb, CDK_POLICY, clock=lambda: clock() + SETTLE_SKEW_SECONDS + 60
    )

    def effect() -> EffectResult:
        far_off.settle(REQUEST.key, DECIDED)
        if ends == "loses_the_answer":
            downstream.lose_response(REF)()  # raises OutcomeUnknown after the refund
        if ends == "is_rejected":
            raise RefundRejected("card closed")
        return downstream.refund(REF, 2000)

    with pytest.raises(ActionSettled, match=r"settled by supervisor@acme .* recorded with the"):
        lambda_ledger.execute(
            REQUEST, Attempt("attempt-1", 30), effect=effect, reconcile=downstream.lookup(REF)
        )
    expected = {
        "refunds": LedgerStatus.COMPLETED,
        "loses_the_answer": LedgerStatus.UNKNOWN,
        "is_rejected": LedgerStatus.FAILED,
    }[ends]
    record = lambda_ledger.get(REQUEST.key)
    assert record is not None
    assert (record.status, record.resolution) == (expected, DECIDED.to_record())
    assert not {"expires_at", "open_status"} & set(raw(REQUEST.key))
    assert len(downstream.effects) == (0 if ends == "is_rejected" else 1)
    # Every later delivery meets the decision, and sends nothing.
    with pytest.raises(ActionSettled):
        _deliver_refund(lambda_ledger, downstream, "attempt-2")
    assert len(downstream.effects) == (0 if ends == "is_rejected" else 1)
