"""The ReconcileStep -> RETRY -> step loop is bounded by the ledger budget in every step.

The state machine re-enters a step whenever ReconcileStep answers RETRY (docs/design.md §5:
"provably
not found -> the same action may be re-attempted with the same key (inside the budget)"). These
tests drive that loop the way the workflow does and count the rounds: whatever keeps the step
from settling, the loop must end in ESCALATE within the budget, with at most one effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from local_aws.tables import StackTables
from saga.errors import OutcomeUnknown, OutOfStock
from saga.ledger import LedgerStatus
from saga.models import Case, ReconcileResult
from saga.sandbox.faults import NoFaults
from tests.tools_harness import Delivery, ListFaults, ToolsEnv, make_case, tools_env

BUDGET = 4


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables, attempt_budget=BUDGET) as tools:
        yield tools


def drive_reserve_loop(
    env: ToolsEnv, case: Case, reserve_faults: Callable[[], object]
) -> list[str]:
    """ReserveStock -> (OutcomeUnknown) -> ReconcileStep -> RETRY -> ReserveStock ... as the ASL
    does; returns the reconcile decisions in order (stops at the first that is not RETRY)."""
    deliveries = Delivery("ReserveStock", case.case_id)
    reconciles = Delivery("ReconcileStep", case.case_id)
    decisions: list[str] = []
    for _ in range(5 * BUDGET):  # far more rounds than any budget allows
        try:
            env.reserve(case, deliveries.next(), faults=reserve_faults())  # type: ignore[arg-type]
        except OutcomeUnknown:
            pass
        else:
            decisions.append("COMPLETED")
            return decisions
        answer: ReconcileResult = env.reconcile(case, "reserve", reconciles.next())
        decisions.append(answer.decision)
        if answer.decision != "RETRY":
            return decisions
    return decisions


def test_reserve_that_never_reaches_the_inventory_escalates_within_the_budget(
    env: ToolsEnv,
) -> None:
    # Every ReserveStock delivery times out before anything is written (no ledger record ever):
    # without a counter the reconcile would answer RETRY forever.
    case = make_case()
    decisions = drive_reserve_loop(env, case, lambda: ListFaults("timeout"))
    assert decisions[-1] == "ESCALATE", decisions
    assert decisions.count("RETRY") <= BUDGET
    assert env.reservations(case.case_id) == []
    assert env.available("SKU-RED-MUG") == 100
    record = env.record("acme#reserve#case-0001.reserve")
    assert record is not None and record.status in (LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN)


def test_reserve_retried_after_a_proven_absence_reserves_exactly_once(env: ToolsEnv) -> None:
    # One timeout (nothing written), reconcile proves absence, the re-attempt reserves once.
    case = make_case()
    faults = iter([ListFaults("timeout"), NoFaults(), NoFaults()])
    decisions = drive_reserve_loop(env, case, lambda: next(faults))
    assert decisions == ["RETRY", "COMPLETED"]
    assert len(env.reservations(case.case_id)) == 1
    assert env.available("SKU-RED-MUG") == 99
    record = env.record("acme#reserve#case-0001.reserve")
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.attempts <= BUDGET


def test_out_of_stock_on_the_re_attempt_is_recorded_not_left_uncertain(env: ToolsEnv) -> None:
    # The re-attempt after a proven absence finds no stock: that is a business failure, recorded
    # over the reconcile's placeholder, not an OutcomeUnknown that would loop to escalation.
    case = make_case(reserve={"sku": "SKU-EMPTY", "quantity": 1}, faults={"reserve": []})
    with pytest.raises(OutcomeUnknown):
        env.reserve(case, faults=ListFaults("timeout"))
    answer = env.reconcile(case, "reserve")
    assert answer.decision == "RETRY"
    with pytest.raises(OutOfStock, match="SKU-EMPTY"):
        env.reserve(case, Delivery("ReserveStock", case.case_id, count=10).next())
    record = env.record("acme#reserve#case-0001.reserve")
    assert record is not None and record.status is LedgerStatus.FAILED
    assert record.error is not None and record.error["type"] == "OutOfStock"


def test_refund_re_attempts_that_never_reach_the_ledger_still_end_in_escalation(
    env: ToolsEnv,
) -> None:
    # IssueRefund times out (States.Timeout) before its claim, every time: only ReconcileStep
    # runs, and its RETRY answers are what the budget must count.
    case = make_case()
    reconciles = Delivery("ReconcileStep", case.case_id)
    decisions = []
    for _ in range(5 * BUDGET):
        answer = env.reconcile(case, "refund", reconciles.next())
        decisions.append(answer.decision)
        if answer.decision != "RETRY":
            break
    assert decisions == ["RETRY"] * BUDGET + ["ESCALATE"]
    assert "budget" in answer.reason


def test_refund_after_a_no_record_retry_is_made_once(env: ToolsEnv) -> None:
    case = make_case()
    answer = env.reconcile(case, "refund")
    assert answer.decision == "RETRY"
    deliveries = Delivery("IssueRefund", case.case_id)
    first = env.issue_refund(case, deliveries.next())
    again = env.issue_refund(case, deliveries.next())
    assert not first.replayed and again.replayed
    assert env.refunds(case.case_id) == 1
