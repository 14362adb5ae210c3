"""The knowledge checks of issue 4, at tool level, effects counted in the sandbox tables."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_aws.tables import StackTables
from saga.errors import BudgetExhausted, OutcomeUnknown
from saga.ledger import LedgerStatus
from saga.models import Case
from tests.tools_harness import Delivery, ToolsEnv, make_case, tools_env


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def test_two_approved_20_usd_refunds_on_different_orders_both_happen(env: ToolsEnv) -> None:
    first = make_case("case-a", order={"order_id": "ord-1", "customer_id": "cus-42"})
    second = make_case("case-b", order={"order_id": "ord-2", "customer_id": "cus-42"})
    one = env.issue_refund(first, Delivery("IssueRefund", "case-a").next())
    two = env.issue_refund(second, Delivery("IssueRefund", "case-b").next())
    assert one.action_key != two.action_key
    assert one.downstream_ref != two.downstream_ref
    assert (env.refunds("case-a"), env.refunds("case-b")) == (1, 1)


def test_crash_after_payment_call_lease_expires_next_worker_reconciles(env: ToolsEnv) -> None:
    case = make_case()
    delivery = Delivery("IssueRefund", case.case_id, remaining_seconds=25)
    crashed = delivery.next()
    request_key = "acme#refund#case-0001.refund"

    class Crash(BaseException):
        """The worker dies after the provider call returned and before it is recorded."""

    provider = env.provider(case)
    original = provider.refund

    def refund_then_crash(*args, **kwargs):  # type: ignore[no-untyped-def]
        original(*args, **kwargs)
        raise Crash

    provider.refund = refund_then_crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        env.issue_refund(case, crashed, provider=provider)
    assert env.refunds(case.case_id) == 1
    record = env.record(request_key)
    assert record is not None and record.status is LedgerStatus.IN_PROGRESS

    env.clock.advance(25 + 30 + 1)  # past the lease: remaining time + margin
    result = env.issue_refund(case, delivery.next())
    assert result.reconciled and not result.replayed
    assert result.attempts == 2
    assert env.refunds(case.case_id) == 1
    record = env.record(request_key)
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.downstream_ref == result.downstream_ref


def test_late_replay_long_after_the_token_window_is_stopped_by_the_ledger(env: ToolsEnv) -> None:
    """The transaction token covers 10 minutes (and moto ignores it entirely): what stops a
    replay a day later is the ledger record's condition, so stock is taken exactly once."""
    case = make_case()
    delivery = Delivery("ReserveStock", case.case_id)
    first = env.reserve(case, delivery.next())
    env.clock.advance(24 * 3600)
    replay = env.reserve(case, delivery.next())
    assert replay.replayed and replay.result == first.result
    assert env.available("SKU-RED-MUG") == 99
    assert len(env.reservations(case.case_id)) == 1


def test_replay_after_retention_is_never_executed_again(env: ToolsEnv) -> None:
    """Past its retention the COMPLETED record still says what happened (TTL deletion lags):
    the replay returns it. Once TTL has deleted it, the reservation item itself refuses a second
    reservation, and the delivery goes to reconciliation instead of reporting out-of-stock."""
    case = make_case()
    delivery = Delivery("ReserveStock", case.case_id)
    first = env.reserve(case, delivery.next())
    env.clock.advance(env.policy.retention_seconds + 1)  # TTL deletion has not happened yet
    replayed = env.reserve(case, delivery.next())
    assert replayed.replayed and replayed.result == first.result
    assert env.available("SKU-RED-MUG") == 99

    env.client.delete_item(  # what DynamoDB's TTL does to it, eventually
        TableName=env.names["LEDGER_TABLE"], Key={"action_key": {"S": first.action_key}}
    )
    with pytest.raises(OutcomeUnknown, match="already exists without a ledger record"):
        env.reserve(case, delivery.next())
    assert env.available("SKU-RED-MUG") == 99
    assert len(env.reservations(case.case_id)) == 1


def reserve_for(env: ToolsEnv, case: Case) -> None:
    env.reserve(case)
    assert env.available("SKU-RED-MUG") == 99


def test_compensation_with_lost_answer_is_retried_safely_stock_restored_once(env: ToolsEnv) -> None:
    """The release happened but its answer was lost: the record says UNKNOWN (never "nothing
    happened") until a lookup can see the reservation released by this very key."""
    case = make_case(faults={"release": ["lose_response", "timeout", "timeout"]})
    reserve_for(env, case)
    delivery = Delivery("ReleaseReservation", case.case_id)
    for _ in range(3):  # the lost answer, then two lookups that get no answer
        with pytest.raises(OutcomeUnknown):
            env.release(case, delivery.next())
        record = env.record("acme#release#case-0001.reserve")
        assert record is not None and record.status is LedgerStatus.UNKNOWN
    assert env.available("SKU-RED-MUG") == 100  # restored by the lost-answer delivery only
    done = env.release(case, delivery.next())
    assert done.result["status"] == "RELEASED" and done.reconciled
    assert env.available("SKU-RED-MUG") == 100
    assert env.release(case, delivery.next()).replayed
    assert env.available("SKU-RED-MUG") == 100


def test_compensation_that_cannot_finish_is_unfinished_work_not_success(env: ToolsEnv) -> None:
    case = make_case(faults={"release": ["timeout"] * 10})
    reserve_for(env, case)
    delivery = Delivery("ReleaseReservation", case.case_id)
    for _ in range(env.policy.attempt_budget):
        with pytest.raises(OutcomeUnknown, match=r"did not answer|cannot be determined"):
            env.release(case, delivery.next())
    with pytest.raises(BudgetExhausted):
        env.release(case, delivery.next())
    assert env.available("SKU-RED-MUG") == 99  # nothing restored, and nothing claims it was
    record = env.case_record(case.case_id)
    assert record is not None and record["outcome"] == "COMPENSATION_PENDING"
    ledger_record = env.record("acme#release#case-0001.reserve")
    assert ledger_record is not None and ledger_record.status is LedgerStatus.UNKNOWN


def test_carrier_never_gets_two_shipments_under_lost_responses_retries_and_takeovers(
    env: ToolsEnv,
) -> None:
    case = make_case(faults={"shipment": ["timeout", "lose_response"]})
    delivery = Delivery("CreateShipment", case.case_id, remaining_seconds=10)
    with pytest.raises(OutcomeUnknown):  # timeout: nothing created
        env.create_shipment(case, delivery.next())
    # the next delivery takes over the UNKNOWN record, looks up (consumes lose_response: no
    # answer), and leaves it UNKNOWN instead of sending
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case, delivery.next())
    assert env.shipments(case.case_id) == 0
    # now the lookup answers "absent": exactly one shipment is sent
    first = env.create_shipment(case, delivery.next())
    assert env.shipments(case.case_id) == 1
    # a duplicate delivery, and a takeover-style retry later, replay it
    assert env.create_shipment(case, delivery.next()).replayed
    env.clock.advance(3600)
    assert env.create_shipment(case, delivery.next()).downstream_ref == first.downstream_ref
    assert env.shipments(case.case_id) == 1


def test_lost_carrier_response_then_crash_then_takeover_finds_the_shipment(env: ToolsEnv) -> None:
    case = make_case(faults={"shipment": ["lose_response"]})
    delivery = Delivery("CreateShipment", case.case_id, remaining_seconds=10)
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case, delivery.next())
    assert env.shipments(case.case_id) == 1
    result = env.create_shipment(case, delivery.next())
    assert result.reconciled and env.shipments(case.case_id) == 1


def test_unavailable_carrier_stays_unknown_and_reconcile_escalates(env: ToolsEnv) -> None:
    case = make_case(faults={"shipment": ["unavailable"]})
    delivery = Delivery("CreateShipment", case.case_id)
    for _ in range(3):
        with pytest.raises(OutcomeUnknown):
            env.create_shipment(case, delivery.next())
    record = env.record("acme#ship#case-0001.ship")
    assert record is not None and record.status is LedgerStatus.UNKNOWN
    decision = env.reconcile(case, "ship")
    assert decision.decision == "ESCALATE" and decision.result is None
    assert "unavailable" in decision.reason
    assert env.shipments(case.case_id) == 0
    record = env.record("acme#ship#case-0001.ship")
    assert record is not None and record.status is LedgerStatus.UNKNOWN


def test_lost_refund_response_is_reconciled_not_refunded_again(env: ToolsEnv) -> None:
    case = make_case(faults={"refund": ["lose_response"]})
    with pytest.raises(OutcomeUnknown):
        env.issue_refund(case, Delivery("IssueRefund", case.case_id).next())
    decision = env.reconcile(case, "refund")
    assert decision.decision == "RESUME"
    assert decision.result is not None and decision.result.reconciled
    assert env.refunds(case.case_id) == 1
