"""The key checks (fault_campaign/key_checks.py and the budget's outcome in outcomes.py) can
fail: another request's record taken over, a resubmission with other parameters taken for a
duplicate, a dispatch past the attempt budget, and a step whose budget is spent left FAILED are
violations; the honest state next to each is not."""

from __future__ import annotations

import copy
import random
from typing import Any

from fault_campaign.generator import generate
from fault_campaign.invariants import check_case
from fault_campaign.observe import Snapshot, foreign_request
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun
from fault_campaign.shapes import ATTEMPT_BUDGET, _budget_spent
from tests.campaign.test_campaign_oracle import OWNER, _plan, _record, _shipment_rejected

AGAIN = OWNER + "-again"


def _found(plan: CasePlan, *snaps: Snapshot, redrives: int = 0) -> set[str]:
    run = CaseRun(plan=plan, stock_before=10, stock_after=snaps[-1].stock, snapshots=list(snaps))
    run.owner_arn, run.redrives = OWNER, redrives
    return {v["invariant"] for v in check_case(run, budget=ATTEMPT_BUDGET).violations}


# --- another request's record under the case's key (§2, §3.2) ----------------------------------
def _with_foreign_ship(**fields: Any) -> tuple[CasePlan, Snapshot]:
    plan = _plan(nemeses=[{"kind": "foreign_record", "operation": "ship"}])
    snap, _ = _shipment_rejected()
    digest = foreign_request(plan.case, "ship").digest
    snap.ledger["ship"] = {
        **_record("ship", "IN_PROGRESS", request_digest=digest),
        "created_at": 500.0,
        "claimed_at": 500.0,
        "lease_expires_at": 500.0,
        **fields,
    }
    return plan, snap


def test_another_requests_record_left_as_it_was_passes() -> None:
    plan, snap = _with_foreign_ship()
    assert "foreign_record_untouched" not in _found(plan, snap)


def test_another_requests_record_taken_over_and_completed_is_a_violation() -> None:
    """The `digest-check` mutant: the case decides from a record of another digest as if it
    were its own, takes it over and completes it."""
    plan, snap = _with_foreign_ship(
        status="COMPLETED", attempts=2, owner="c1#CreateShipment#0#0:x", downstream_ref="sh_1"
    )
    assert "foreign_record_untouched" in _found(plan, snap)
    plan, snap = _with_foreign_ship(attempts=2, claimed_at=900.0)  # claimed again, nothing more
    assert "foreign_record_untouched" in _found(plan, snap)


def test_another_requests_record_is_settled_only_by_a_resolution_of_the_case() -> None:
    resolution = {"by": "ops@example.com", "decision": "done", "at": "2026-01-02T00:00:00Z"}
    plan, snap = _with_foreign_ship(resolution=resolution)
    assert "foreign_record_untouched" in _found(plan, snap)
    snap.case_record = {**(snap.case_record or {}), "resolution": resolution}
    assert "foreign_record_untouched" not in _found(plan, snap)


# --- one case id, one approved request (§5 item 4) ---------------------------------------------
def _resubmitted(execution: dict[str, Any]) -> tuple[CasePlan, Snapshot, Snapshot]:
    plan = _plan(duplicate={"when": "changed", "jump": 60})
    closed, _ = _shipment_rejected()
    later = copy.deepcopy(closed)
    later.label = "resubmitted changed"
    later.executions[AGAIN] = {"arn": AGAIN, "name": "c1-again", **execution}
    return plan, closed, later


_DUPLICATE = {
    "status": "SUCCEEDED",
    "output": {"case_id": "c1", "outcome": "DUPLICATE", "original_execution_arn": OWNER},
    "error": None,
    "path": ["ValidateCase", "DuplicateCase"],
    "scheduled_states": ["ValidateCase"],
    "last_state": "DuplicateCase",
}
_KEY_CONFLICT = {
    "status": "FAILED",
    "output": None,
    "error": "KeyConflict",
    "path": ["ValidateCase"],
    "scheduled_states": ["ValidateCase"],
    "last_state": "ValidateCase",
}


def test_a_resubmission_with_other_parameters_taken_for_a_duplicate_is_a_violation() -> None:
    """The `case-digest` mutant: the case record's digest is not compared, so the changed
    request ends DUPLICATE (SUCCEEDED, nothing done) instead of a KeyConflict rejection."""
    plan, closed, later = _resubmitted(_DUPLICATE)
    assert "changed_resubmission_rejected" in _found(plan, closed, later)
    plan, closed, later = _resubmitted(_KEY_CONFLICT)
    assert "changed_resubmission_rejected" not in _found(plan, closed, later)


def test_a_resubmission_with_other_parameters_keeps_the_recorded_digest() -> None:
    plan, closed, later = _resubmitted(_KEY_CONFLICT)
    closed.case_record = {**(closed.case_record or {}), "digest": "sha256:first"}
    later.case_record = {**(later.case_record or {}), "digest": "sha256:second"}
    assert "changed_resubmission_rejected" in _found(plan, closed, later)


def test_a_resubmission_of_a_case_never_recorded_is_not_held_to_the_first_request() -> None:
    plan, closed, later = _resubmitted(_DUPLICATE)
    closed.case_record = None
    assert "changed_resubmission_rejected" not in _found(plan, closed, later)


# --- the lifetime attempt budget (§3.2, §4) ----------------------------------------------------
_FAILED_AT_REFUND = {
    "arn": OWNER,
    "name": "c1",
    "status": "FAILED",
    "output": None,
    "error": "TransientError",
    "path": ["ValidateCase", "ReserveStock", "IssueRefund"],
    "scheduled_states": ["ValidateCase", "ReserveStock", *["IssueRefund"] * 4],
    "last_state": "IssueRefund",
    "last_run_deliveries": 4,
}


def _spent(attempts: int = ATTEMPT_BUDGET) -> tuple[CasePlan, Snapshot]:
    """Every delivery of the refund failed before committing and gave its lease back."""
    plan = _plan({"refund": ["fail_before_commit"] * ATTEMPT_BUDGET})
    snap, _ = _shipment_rejected()
    snap.label = "redrive 1"
    snap.ledger = {
        "reserve": snap.ledger["reserve"],
        "refund": _record("refund", "IN_PROGRESS", attempts=attempts),
    }
    snap.refunds, snap.executions = [], {OWNER: copy.deepcopy(_FAILED_AT_REFUND)}
    snap.reservations[0] = {
        **{k: v for k, v in snap.reservations[0].items() if k != "released_by"},
        "status": "HELD",
    }
    snap.stock = 10 - 2
    snap.case_record = {"case_id": "c1", "outcome": "IN_PROGRESS", "execution_arn": OWNER}
    return plan, snap


def test_a_refund_dispatched_past_the_spent_budget_is_a_violation() -> None:
    """The `budget` mutant: the redrive after the budget was spent dispatches the refund again
    (the 9th attempt) and completes it."""
    plan, spent = _spent()
    later = copy.deepcopy(spent)
    later.label = "redrive 2"
    later.ledger["refund"] = _record(
        "refund", "COMPLETED", attempts=ATTEMPT_BUDGET + 1, downstream_ref="re_1"
    )
    later.refunds = [{"refund_id": "re_1", "case_id": "c1", **plan.case["refund"]}]
    found = _found(plan, spent, later)
    assert {"no_dispatch_past_budget", "attempts_within_budget"} <= found
    later.ledger["refund"]["attempts"] = ATTEMPT_BUDGET  # dispatched, and not even counted
    assert "no_dispatch_past_budget" in _found(plan, spent, later)


def test_a_spent_budget_that_escalates_without_dispatching_passes() -> None:
    plan, spent = _spent()
    later = copy.deepcopy(spent)
    later.label = "redrive 2"
    later.ledger["refund"]["escalated_at"] = 2000.0
    assert "no_dispatch_past_budget" not in _found(plan, spent, later)
    # one attempt short of the budget, a dispatch is the next attempt's right
    plan, short = _spent(ATTEMPT_BUDGET - 1)
    later.ledger["refund"] = _record("refund", "COMPLETED", downstream_ref="re_1")
    later.refunds = [{"refund_id": "re_1", "case_id": "c1", **plan.case["refund"]}]
    assert "no_dispatch_past_budget" not in _found(plan, short, later)


def test_a_forward_step_still_failed_with_its_budget_spent_after_the_last_redrive() -> None:
    """After the cause was removed, the last redrive's delivery meets the spent budget: its
    BudgetExhausted is caught to ReconcileStep, which escalates (§4). Still FAILED there is a
    violation; still FAILED with budget left is judged by the plan's faults as before."""
    plan, spent = _spent()
    assert "budget_spent_escalates" in _found(plan, spent, redrives=1)
    plan, short = _spent(ATTEMPT_BUDGET - 4)
    assert "budget_spent_escalates" not in _found(plan, short, redrives=1)


# --- the shape that spends the budget ----------------------------------------------------------
def test_the_budget_shape_fails_every_delivery_of_two_runs_then_redrives_healed() -> None:
    faults: dict[str, list[str]] = {"reserve": ["timeout"]}
    shaped = _budget_spent(random.Random(3), faults)
    ((downstream, names),) = faults.items()
    assert downstream in ("refund", "shipment")
    assert names == ["fail_before_commit"] * ATTEMPT_BUDGET
    # 4 deliveries a run (retry.tool MaxAttempts 3): the first run and one redrive spend it
    assert shaped.redrives == [{"jump": 60, "heal": False}]
    assert shaped.nemeses == []


def test_the_slice_holds_cases_of_the_budget_shape() -> None:
    """Seed 20261 (the slice), cases 54 and 268 (blocks of 25) are drawn in the shape."""
    for index in (54, 268):
        plan = generate(20261, index, block_size=25)
        ((_, names),) = plan.faults.items()
        assert names == ["fail_before_commit"] * ATTEMPT_BUDGET, (index, plan.faults)
        assert plan.redrives == [{"jump": 60, "heal": False}]
