"""The daily refund ceiling (docs/design.md §3.12) against moto: the refund's first claim charges
its tenant's counter for the UTC day in one transaction, a refusal is recorded and replayed,
nothing else ever charges again, and only the provider's refusal gives the amount back, to the
day charged, in the write that records it.

"Refunded" means an item in the sandbox payments table (tests/tools_harness.py); the counter is
read with the admin client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.tables import StackTables
from saga.ceilings import LIMIT_MARK, utc_day
from saga.errors import (
    OutcomeUnknown,
    RefundLimitReached,
    RefundRejected,
    TransientError,
)
from saga.identity import Operation, action_request
from saga.ledger import ActionLedger, LedgerRecord, LedgerStatus
from saga.ledger.charges import CONFLICT_ROUNDS, PAUSE_BASE_SECONDS, PAUSE_CAP_SECONDS
from saga.models import Case
from saga.sandbox.payment_provider import SandboxPaymentProvider
from saga_bench.metering import RequestCounter
from tests.integration.ledger_harness import START
from tests.tools_harness import Delivery, ToolsEnv, make_case, tools_env

CEILING = 10_000  # 100.00 USD a day
AMOUNT = 700  # 7.00 USD
DAY = utc_day(START)


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        tools.ceilings = {"acme": {"USD": CEILING}}
        yield tools


def refund_case(number: int, amount: int = AMOUNT, **faults: list[str]) -> Case:
    return make_case(
        f"case-{number:04d}",
        refund={"payment_reference": f"pay-{number}", "amount_minor": amount, "currency": "USD"},
        faults=dict(faults) or None,
    )


def key(case: Case) -> str:
    return action_request(case, Operation.REFUND).key


def limit_numbers(error: Exception) -> dict[str, Any]:
    message = str(error)
    assert LIMIT_MARK in message, message
    return dict(json.loads(message.split(LIMIT_MARK, 1)[1]))


# --- the charge, with the first claim ------------------------------------------------------------
def test_refunds_charge_the_day_until_the_ceiling_then_the_refusal_is_recorded(
    env: ToolsEnv,
) -> None:
    for number in range(14):
        env.issue_refund(refund_case(number))
    assert env.counter("acme", "USD", DAY) == 14 * AMOUNT
    fifteenth = refund_case(14)
    with pytest.raises(RefundLimitReached) as refused:
        env.issue_refund(fifteenth)
    # The numbers, in words and for the state machine: 98.00 of 100.00 used, 7.00 asked.
    assert "98.00 USD (9800 minor units) of it is used on 2023-11-14" in str(refused.value)
    assert limit_numbers(refused.value) == {
        "ceiling": CEILING,
        "used": 14 * AMOUNT,
        "asked": AMOUNT,
        "currency": "USD",
        "day": DAY,
    }
    assert env.refunds("case-0014") == 0
    assert env.counter("acme", "USD", DAY) == 14 * AMOUNT
    record = env.record(key(fifteenth))
    assert record is not None and record.status is LedgerStatus.FAILED
    assert record.error == refused.value.to_record()
    assert record.charged_day is None  # nothing was charged for it


def test_the_refusal_is_replayed_to_every_repeat_and_never_refunds_behind_it(
    env: ToolsEnv,
) -> None:
    env.ceilings = {"acme": {"USD": AMOUNT}}
    env.issue_refund(refund_case(0))
    late = refund_case(1)
    with pytest.raises(RefundLimitReached) as first:
        env.issue_refund(late)
    # The next day has room, but the case's refund is refused for good: a retry or a redrive
    # replays the recorded refusal, charges nothing and refunds nothing.
    env.clock.advance(86_400)
    with pytest.raises(RefundLimitReached) as again:
        env.issue_refund(late)
    assert again.value.message == first.value.message
    assert env.refunds("case-0001") == 0
    assert env.counter("acme", "USD", utc_day(env.clock())) is None


def test_the_headroom_is_the_ceiling_less_this_refund(env: ToolsEnv) -> None:
    env.ceilings = {"acme": {"USD": 2 * AMOUNT + 1}}
    env.issue_refund(refund_case(0))
    env.issue_refund(refund_case(1))  # 1400 of 1401: the next 700 would pass it
    with pytest.raises(RefundLimitReached):
        env.issue_refund(refund_case(2))
    with pytest.raises(RefundLimitReached):
        env.issue_refund(refund_case(3, amount=2))
    env.issue_refund(refund_case(4, amount=1))  # exactly at the ceiling
    assert env.counter("acme", "USD", DAY) == 2 * AMOUNT + 1


def test_a_refund_above_the_ceiling_or_in_a_currency_without_one_is_refused_unread(
    env: ToolsEnv,
) -> None:
    """A ceiling lowered below an accepted case's refund, or a currency the tenant has no ceiling
    for (fail closed): the counter's condition would admit it on a day's first refund, so the
    tool refuses it without charging."""
    env.ceilings = {"acme": {"EUR": 50_000, "USD": AMOUNT - 1}}
    with RequestCounter(env.client).measure() as calls:
        with pytest.raises(RefundLimitReached) as above:
            env.issue_refund(refund_case(0))
        assert limit_numbers(above.value)["used"] is None
        assert "exceeds tenant acme's daily refund ceiling for USD alone" in str(above.value)
        env.ceilings = {"acme": {"EUR": 50_000}}
        with pytest.raises(RefundLimitReached, match="no daily refund ceiling for USD"):
            env.issue_refund(refund_case(1))
    assert env.counter("acme", "USD", DAY) is None
    assert dict(calls) == {"PutItem": 2}  # each refusal recorded; no counter request
    assert env.refunds("case-0000") == env.refunds("case-0001") == 0


def test_a_tenant_without_ceilings_keeps_the_single_put_claim(env: ToolsEnv) -> None:
    env.ceilings = {"globex": {"USD": 100}}
    case = refund_case(0)  # acme: no ceilings
    with RequestCounter(env.client).measure() as calls:
        env.issue_refund(case, provider=provider_apart(env, case))
    assert dict(calls) == {"PutItem": 1, "UpdateItem": 1}  # the claim, the outcome
    assert env.refunds("case-0000") == 1
    record = env.record(key(refund_case(0)))
    assert record is not None and record.charged_day is None


def test_the_charge_costs_no_request_more(env: ToolsEnv) -> None:
    case = refund_case(0)
    with RequestCounter(env.client).measure() as calls:
        env.issue_refund(case, provider=provider_apart(env, case))
    assert dict(calls) == {"TransactWriteItems": 1, "UpdateItem": 1}


def provider_apart(env: ToolsEnv, case: Case) -> SandboxPaymentProvider:
    """The sandbox provider on a client of its own: the ledger's requests counted alone."""
    return SandboxPaymentProvider.create(
        env.admin,
        payments_table=env.names["PAYMENTS_TABLE"],
        sandbox_table=env.names["SANDBOX_TABLE"],
        case_id=case.case_id,
        clock=env.clock,
    )


# --- nothing but the first claim charges ---------------------------------------------------------
def test_a_takeover_a_retry_or_a_replay_never_charges_again(env: ToolsEnv) -> None:
    lost = refund_case(0, refund=["lose_response"])
    deliveries = Delivery("IssueRefund", lost.case_id)
    with pytest.raises(OutcomeUnknown):
        env.issue_refund(lost, deliveries.next())  # charged; the refund committed, unanswered
    env.clock.advance(120)  # past the lease
    env.issue_refund(lost, deliveries.next())  # takes over, looks it up: found
    env.issue_refund(lost, deliveries.next())  # a replay
    retried = refund_case(1, refund=["fail_before_commit"])
    attempts = Delivery("IssueRefund", retried.case_id)
    with pytest.raises(TransientError):
        env.issue_refund(retried, attempts.next())  # charged; nothing sent, lease given back
    env.issue_refund(retried, attempts.next())  # takes the given-back lease over: dispatches
    assert env.refunds(lost.case_id) == env.refunds(retried.case_id) == 1
    assert env.counter("acme", "USD", DAY) == 2 * AMOUNT
    for case in (lost, retried):
        record = env.record(key(case))
        assert record is not None and record.charged_day == DAY
        assert record.charged_minor == AMOUNT and record.attempts == 2


def test_the_takeover_of_a_reconciliation_placeholder_is_the_first_claim(env: ToolsEnv) -> None:
    """The task timed out before its claim, reconciliation found nothing and wrote its
    placeholder (attempts 0): the re-attempt's takeover charges, or is refused and recorded."""
    env.ceilings = {"acme": {"USD": AMOUNT}}
    first, second = refund_case(0), refund_case(1)
    for case in (first, second):
        assert env.reconcile(case, "refund").decision == "RETRY"
        placeholder = env.record(key(case))
        assert placeholder is not None and placeholder.attempts == 0
    env.issue_refund(first)
    assert env.counter("acme", "USD", DAY) == AMOUNT
    with pytest.raises(RefundLimitReached):
        env.issue_refund(second)
    record = env.record(key(second))
    assert record is not None and record.status is LedgerStatus.FAILED
    assert record.reconcile_rounds == 1  # recorded over the placeholder as seen
    assert env.refunds(first.case_id) == 1 and env.refunds(second.case_id) == 0
    assert env.counter("acme", "USD", DAY) == AMOUNT


# --- the give-back -------------------------------------------------------------------------------
def test_the_providers_refusal_gives_the_amount_back_to_the_day_charged(env: ToolsEnv) -> None:
    env.clock.advance(86_400 - 10 - START % 86_400)  # 23:59:50 UTC
    case = refund_case(0, refund=["fail_before_commit", "reject"])
    deliveries = Delivery("IssueRefund", case.case_id)
    with pytest.raises(TransientError):
        env.issue_refund(case, deliveries.next())  # charged on DAY, nothing sent
    env.clock.advance(20)  # the next UTC day
    with pytest.raises(RefundRejected):
        env.issue_refund(case, deliveries.next())
    assert env.counter("acme", "USD", DAY) == 0
    assert env.counter("acme", "USD", utc_day(env.clock())) is None
    # The rejection replayed gives nothing back again.
    with pytest.raises(RefundRejected):
        env.issue_refund(case, deliveries.next())
    assert env.counter("acme", "USD", DAY) == 0


def test_an_unknown_outcome_or_a_persons_decision_gives_nothing_back(env: ToolsEnv) -> None:
    unknown = refund_case(0, refund=["timeout"])
    with pytest.raises(OutcomeUnknown):
        env.issue_refund(unknown)
    escalated = env.reconcile(unknown, "refund", lookup=_undeterminable)
    assert escalated.decision == "ESCALATE"
    env.ledger.settle(key(unknown), _resolution())
    assert env.counter("acme", "USD", DAY) == AMOUNT
    record = env.record(key(unknown))
    assert record is not None and record.status is LedgerStatus.UNKNOWN


def test_a_rejection_that_lost_its_lease_gives_nothing_back(env: ToolsEnv) -> None:
    """The delivery's lease ran out and another delivery took the record over while the provider
    refused: this delivery's FAILED is not written, and neither is its give-back."""
    case = refund_case(0)
    other = Delivery("IssueRefund", case.case_id)
    other.count = 10

    class TakenOverWhileRefusing:
        idempotency_window_seconds = 86_400.0

        def refund(self, request: Any, *, idempotency_key: str) -> Any:
            env.clock.advance(120)
            seen = env.record(key(case))
            assert seen is not None
            taken, _ = env.ledger.store.take_over(
                action_request(case, Operation.REFUND, execution_arn="arn:e"), other.next(), seen
            )
            assert taken is not None
            from saga.ports import DownstreamRejected

            raise DownstreamRejected("card_declined")

        def find_refunds(self, business_ref: str) -> list[Any]:
            return []

    with pytest.raises(OutcomeUnknown, match="lease lost"):
        env.issue_refund(case, provider=TakenOverWhileRefusing())
    assert env.counter("acme", "USD", DAY) == AMOUNT
    record = env.record(key(case))
    assert record is not None and record.status is LedgerStatus.IN_PROGRESS


def test_a_repeated_rejection_write_gives_back_once(env: ToolsEnv) -> None:
    """The rejection's transaction committed and its answer was lost: the same delivery's write
    again finds its own FAILED and gives nothing back a second time."""
    case = refund_case(0, refund=["reject"])
    env.issue_refund(refund_case(1))
    with pytest.raises(RefundRejected):
        env.issue_refund(case)
    assert env.counter("acme", "USD", DAY) == AMOUNT
    record = env.record(key(case))
    assert record is not None and record.owner is not None
    attempt = _attempt_of(record)
    held = LedgerRecord.from_item({**record.item, "status": {"S": "IN_PROGRESS"}})
    again = env.ledger.store.fail_giving_back(
        action_request(case, Operation.REFUND, execution_arn="arn:e"),
        attempt,
        held,
        RefundRejected("card_declined").to_record(),
        env.charge(case),  # type: ignore[arg-type]
    )
    assert again.status is LedgerStatus.FAILED
    assert env.counter("acme", "USD", DAY) == AMOUNT


def test_a_counter_deleted_by_ttl_gets_nothing_back_and_the_rejection_is_recorded(
    env: ToolsEnv,
) -> None:
    case = refund_case(0, refund=["fail_before_commit", "reject"])
    deliveries = Delivery("IssueRefund", case.case_id)
    with pytest.raises(TransientError):
        env.issue_refund(case, deliveries.next())
    env.admin.delete_item(
        TableName=env.names["LIMITS_TABLE"], Key={"counter_key": {"S": f"acme#USD#{DAY}"}}
    )
    with pytest.raises(RefundRejected):
        env.issue_refund(case, deliveries.next())
    assert env.counter("acme", "USD", DAY) is None  # not recreated below zero
    record = env.record(key(case))
    assert record is not None and record.status is LedgerStatus.FAILED


def test_the_counter_outlives_the_ledgers_retention(env: ToolsEnv) -> None:
    env.issue_refund(refund_case(0))
    item = env.admin.get_item(
        TableName=env.names["LIMITS_TABLE"], Key={"counter_key": {"S": f"acme#USD#{DAY}"}}
    )["Item"]
    day_ends = START - START % 86_400 + 86_400
    assert int(item["expires_at"]["N"]) == day_ends + env.policy.retention_seconds + 86_400
    assert {name: value.get("S") for name, value in item.items() if "S" in value} == {
        "counter_key": f"acme#USD#{DAY}",
        "tenant_id": "acme",
        "currency": "USD",
        "utc_day": DAY,
    }


# --- contention ----------------------------------------------------------------------------------
class ConflictingClient:
    """The ledger's client, whose first `conflicts` TransactWriteItems are cancelled for a
    conflict on the counter, as DynamoDB cancels a transaction another one holds an item of."""

    def __init__(self, client: Any, conflicts: int) -> None:
        self._client = client
        self.conflicts = conflicts
        self.tokens: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **request: Any) -> Any:
        self.tokens.append(request["ClientRequestToken"])
        if self.conflicts > 0:
            self.conflicts -= 1
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [
                        {"Code": "None"},
                        {"Code": "TransactionConflict", "Message": "Transaction is ongoing"},
                    ],
                },
                "TransactWriteItems",
            )
        return self._client.transact_write_items(**request)


def _conflicting_ledger(env: ToolsEnv, conflicts: int) -> tuple[ActionLedger, ConflictingClient]:
    client = ConflictingClient(env.client, conflicts)
    ledger = ActionLedger(env.names["LEDGER_TABLE"], client, env.policy, clock=env.clock)  # type: ignore[arg-type]
    return ledger, client


def test_conflicts_are_repeated_inside_the_tool_with_growing_jitter(env: ToolsEnv) -> None:
    from saga.tools.refund import issue_refund

    ledger, client = _conflicting_ledger(env, CONFLICT_ROUNDS - 1)
    pauses: list[int] = []
    ledger.store.pause = pauses.append
    case = refund_case(0)
    issue_refund(
        case,
        Delivery("IssueRefund", case.case_id).next(),
        execution_arn="arn:e",
        ledger=ledger,
        provider=env.provider(case),
        charge=env.charge(case),
    )
    assert pauses == list(range(CONFLICT_ROUNDS - 1))
    assert len(set(client.tokens)) == CONFLICT_ROUNDS  # each repeat its own token
    assert env.counter("acme", "USD", DAY) == AMOUNT and env.refunds(case.case_id) == 1


def test_conflicts_past_the_rounds_are_transient_and_write_nothing(env: ToolsEnv) -> None:
    from saga.tools.refund import issue_refund

    ledger, _ = _conflicting_ledger(env, CONFLICT_ROUNDS)
    ledger.store.pause = lambda repeat: None
    case = refund_case(0)
    with pytest.raises(TransientError, match="TransactionConflict"):
        issue_refund(
            case,
            Delivery("IssueRefund", case.case_id).next(),
            execution_arn="arn:e",
            ledger=ledger,
            provider=env.provider(case),
            charge=env.charge(case),
        )
    assert env.record(key(case)) is None
    assert env.counter("acme", "USD", DAY) is None


def test_the_pause_is_full_jitter_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import time

    from saga.ledger import charges

    drawn: list[tuple[float, float]] = []
    slept: list[float] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return high

    monkeypatch.setattr(random, "uniform", uniform)
    monkeypatch.setattr(time, "sleep", slept.append)
    for repeat in range(CONFLICT_ROUNDS):
        charges.full_jitter_pause(repeat)
    caps = [min(PAUSE_CAP_SECONDS, PAUSE_BASE_SECONDS * 2**r) for r in range(CONFLICT_ROUNDS)]
    assert drawn == [(0, cap) for cap in caps] and slept == caps
    assert sum(caps) < 5  # the worst case, far inside a function's 30 s


# --- helpers -------------------------------------------------------------------------------------
def _undeterminable() -> Any:
    from saga.ledger import Undeterminable

    return Undeterminable("the provider does not answer")


def _resolution() -> Any:
    from saga.ledger import Resolution as LedgerResolution

    return LedgerResolution(by="lead@acme", decision="refunded by hand", at="2023-11-15T09:00:00Z")


def _attempt_of(record: LedgerRecord) -> Any:
    from saga.ledger import Attempt

    assert record.owner is not None
    return Attempt(attempt_id=record.owner, remaining_seconds=30.0)
