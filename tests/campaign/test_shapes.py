"""The campaign's plan shapes (fault_campaign/shapes.py) through the real state machine: each
reaches the state it is drawn for, and the case stays honest there."""

from __future__ import annotations

import random
from typing import Any

import pytest

from fault_campaign.generator import generate
from fault_campaign.invariants import check_case
from fault_campaign.observe import Observer
from fault_campaign.orchestrate import SLICE_BLOCK_SIZE, SLICE_CASES, SLICE_SEED
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRunner
from fault_campaign.shapes import (
    ATTEMPT_BUDGET,
    Shaped,
    _budget_spent,
    _decided_at_reconciliation,
    _decided_while_held,
    _delayed_release,
    _legacy_retention_taken_over,
    _old_execution,
    _reconciled_past_the_key_window,
    shape,
)
from local_aws.environment import LocalAws
from tests.campaign.test_campaign_findings import _case
from tests.campaign.test_overlap import waits_pass_on_the_clock  # noqa: F401 (a fixture)

DAY = 86400


def test_a_refund_delivered_again_past_the_retention_is_looked_up_not_sent_again(
    local_aws: LocalAws,
) -> None:
    """IssueRefund's answers are lost through the first run and three redrives (13, 26, 32
    days after the start). By the third, the refund's record (closed at the start) has expired
    and the execution is older than the retention: the fresh claim counts as a possible
    dispatch and looks the refund up first (§3.2); the provider, whose idempotency key lived
    24 hours, would have made a second refund. One refund, recorded again, the case completed."""
    faults: dict[str, list[str]] = {}
    shaped = _old_execution(faults)
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case("case-old-execution", faults),
        nemeses=shaped.nemeses,
        redrives=shaped.redrives or [],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert check_case(run, budget=8).violations == []
    assert [s.label for s in run.snapshots] == [
        "closed",
        "redrive 1",
        "redrive 2",
        "redrive 3",
        "redrive 4",
    ]
    execution = run.final.executions[run.owner_arn or ""]
    second = run.snapshots[2]  # 26 days after the start: the record is kept
    assert second.ledger["refund"]["status"] == "COMPLETED"
    assert run.snapshots[3].clock - run.snapshots[0].clock > 31 * DAY
    assert len(run.final.refunds) == 1
    refund = run.final.ledger["refund"]
    assert refund["status"] == "COMPLETED"
    assert refund["downstream_ref"] == run.final.refunds[0]["refund_id"]
    assert float(refund["updated_at"]) > run.snapshots[2].clock  # written again past day 30
    assert (execution["status"], (execution["output"] or {}).get("outcome")) == (
        "SUCCEEDED",
        "COMPLETED",
    )


def test_a_refund_whose_budget_is_spent_is_escalated_without_another_dispatch(
    local_aws: LocalAws,
) -> None:
    """Every delivery of the refund fails before committing through the first run and one
    redrive: eight attempts, each giving its lease back, spend the lifetime budget. The last
    redrive, the cause removed, must not dispatch a ninth (§3.2): the lookup finds nothing,
    BudgetExhausted is caught to ReconcileStep, and the case escalates with no refund."""
    faults: dict[str, list[str]] = {}
    shaped = _budget_spent(random.Random(1), faults)
    assert list(faults) == ["refund"]  # the seed chosen for the refund
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case("case-budget-spent", faults),
        redrives=shaped.redrives or [],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert check_case(run, budget=ATTEMPT_BUDGET).violations == []
    assert [s.label for s in run.snapshots] == ["closed", "redrive 1", "redrive 2"]
    spent = run.snapshots[1].ledger["refund"]
    assert (spent["status"], spent["attempts"], spent.get("owner")) == (
        "IN_PROGRESS",
        ATTEMPT_BUDGET,
        None,
    )
    refund = run.final.ledger["refund"]
    assert refund["attempts"] == ATTEMPT_BUDGET and "escalated_at" in refund
    assert run.final.refunds == []
    output = run.final.executions[run.owner_arn or ""]["output"] or {}
    assert (output.get("outcome"), output["escalation"]["step"]) == ("ESCALATED", "refund")


@pytest.mark.parametrize("step", ["refund", "ship"])
def test_an_outcome_held_past_a_resolution_lands_beside_the_decision(
    local_aws: LocalAws, step: str
) -> None:
    """The step's answer is lost after its effect and its outcome write held (overlap `stale`),
    no reconcile tool invoke gets through: the case escalates with the action IN_PROGRESS
    under that delivery. A person finds it 31 days on (the lease long past, §3.10) and resolves
    the case; only then does the held write land. It keeps the decision: no retention, not back
    among the open actions (the sweeper lists nothing), and the case does nothing more."""
    faults: dict[str, list[str]] = {}
    shaped = _decided_while_held(random.Random(0), faults)
    nemeses = [{**n, "step": step} if n["kind"] == "overlap" else n for n in shaped.nemeses]
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case(f"case-held-{step}", faults),
        nemeses=nemeses,
        operator=shaped.operator,
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert [e["step"] for e in run.operator] == shaped.operator["steps"]  # type: ignore[index]
    jumped, resolve, release, sweep, _ = run.operator
    assert resolve.get("resolved"), resolve
    before = run.snapshots[jumped["snapshot"]].ledger[step]
    assert before["status"] == "IN_PROGRESS" and before.get("owner")  # still held
    assert release["released"] is True
    record = run.snapshots[release["snapshot"]].ledger[step]
    assert record["status"] == "UNKNOWN" and record["resolution"]["by"] == "operator@campaign"
    assert not {"open_status", "expires_at"} & set(record)
    assert sweep["report"]["action_keys"] == []
    assert check_case(run, budget=8).violations == []


def test_the_slice_draws_a_few_decisions_while_a_delivery_is_held() -> None:
    """The fixed-seed slice (`make test`) reaches the held outcome a few times, each case with
    its shape's nemeses alone: no other overlap, fault or duplicate changes what it tests."""
    plans = [generate(SLICE_SEED, i, block_size=SLICE_BLOCK_SIZE) for i in range(SLICE_CASES)]
    held = [p for p in plans if "release" in (p.operator or {}).get("steps", ())]
    assert len(held) >= 3
    for plan in held:
        overlaps = [n for n in plan.nemeses if n["kind"] == "overlap"]
        assert [(n["how"], n["until"]) for n in overlaps] == [("stale", "released")]
        assert plan.operator is not None and plan.operator["steps"][:3] == [
            "jump",
            "resolve",
            "release",
        ]
        assert plan.duplicate is None and plan.faults == {}
        assert {n["kind"] for n in plan.nemeses} == {"overlap", "invoke_error"}


@pytest.mark.usefixtures("waits_pass_on_the_clock")
def test_a_release_transaction_landing_after_the_next_delivery_released_gives_no_stock_back(
    local_aws: LocalAws,
) -> None:
    """The shipment is rejected; the release's first delivery A sends its transaction, which is
    held on the network while A's task times out. The next delivery meets A's live lease
    (ActionPending), then, once it ran out, takes over, finds the reservation HELD (§3.5) and
    releases it; only then A's transaction lands: its condition (the reservation HELD, §5.1)
    refuses it, so the stock comes back once. With the condition loosened (the mutant
    `release-held-condition`) the stock comes back twice and the oracle says so."""
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case("case-delayed-release", {"shipment": ["reject"]}),
        nemeses=[_delayed_release()],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert check_case(run, budget=8).violations == []
    assert run.fired == ["overlap:delayed:release:dispatch"]  # B's dispatch let A's go on
    assert run.overlaps["release"] >= 2
    [reservation] = run.final.reservations
    release = run.final.ledger["release"]
    assert (reservation["status"], reservation["released_by"]) == (
        "RELEASED",
        release["action_key"],
    )
    assert (release["status"], release["attempts"]) == ("COMPLETED", 2)  # A and the takeover
    assert run.stock_after == run.stock_before


def test_the_slice_reaches_a_delayed_release_with_one_overlap_a_case() -> None:
    """The shape stream alone says which cases draw the shape (cheap); those plans that are not
    generated to be rejected carry the delayed release and no overlap of their own besides."""
    shaped = [
        index
        for index in range(SLICE_CASES)
        if _delayed_release()
        in shape(random.Random(f"{SLICE_SEED}:shape:{index}"), {}, "SKU").nemeses
    ]
    generated = [generate(SLICE_SEED, index, block_size=SLICE_BLOCK_SIZE) for index in shaped]
    plans = [p for p in generated if p.expect_rejection is None]  # a rejected case is not shaped

    assert plans and all(
        p.faults in ({"refund": ["reject"]}, {"shipment": ["reject"]}) for p in plans
    )
    assert all([n["kind"] for n in p.nemeses] == ["overlap"] for p in plans)


class _Roll(random.Random):
    """A stream whose first draw (the shape's roll) is `roll`; the rest as seed 0 draws them."""

    def __init__(self, roll: float) -> None:
        super().__init__(0)
        self.roll: float | None = roll

    def random(self) -> float:
        roll, self.roll = self.roll, None
        return super().random() if roll is None else roll


def test_each_roll_range_draws_its_own_shape_and_only_it() -> None:
    """A shape's range gives that shape alone: a refused refund and a stuck compensation keep
    their rejection (a merge once let them fall through to the budget shape, and the slice lost
    its REFUND_REJECTED cases)."""

    def drawn(roll: float) -> dict[str, list[str]]:
        faults: dict[str, list[str]] = {"reserve": ["timeout"]}
        shape(_Roll(roll), faults, "CMP-A")
        return faults

    assert drawn(0.08) == {"refund": ["reject"]}
    stuck = drawn(0.02)
    assert stuck.get("refund", stuck.get("shipment")) == ["reject"] and "release" in stuck
    assert drawn(0.21) in (
        {"refund": ["fail_before_commit"] * ATTEMPT_BUDGET},
        {"shipment": ["fail_before_commit"] * ATTEMPT_BUDGET},
    )
    assert drawn(0.22) == {"reserve": ["timeout"]}  # no shape: the plan's own faults
    assert drawn(0.28) == {"refund": ["timeout"] * 4}  # reconciled past the key window
    assert drawn(0.29) == {"refund": ["fail_before_commit"] * 4}  # a legacy retention
    assert drawn(0.30) == {"refund": ["timeout"]}  # decided at reconciliation
    assert drawn(0.31) == {"reserve": ["timeout"]}


# --- the shapes of issue 41 ---------------------------------------------------------------------
def _shaped_run(local: LocalAws, case_id: str, shaped: Shaped, faults: dict[str, list[str]]) -> Any:
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case(case_id, faults),
        nemeses=shaped.nemeses,
        redrives=shaped.redrives or [],
        operator=shaped.operator,
    )
    return CaseRunner(Observer(local)).run(plan)


def test_a_refund_reconciled_a_day_after_its_first_dispatch_is_escalated_not_retried(
    local_aws: LocalAws,
) -> None:
    """Every answer of IssueRefund's first run is lost, its request and lookups timed out: the
    refund UNKNOWN, FAILED. Redriven 25 hours later, nothing is found, but the provider's key
    has expired: IssueRefund refuses to send, and the reconcile tool escalates (no RETRY); the
    campaign's `retry_inside_key_window` holds it to that."""
    faults: dict[str, list[str]] = {}
    run = _shaped_run(
        local_aws, "case-past-the-key-window", _reconciled_past_the_key_window(faults), faults
    )

    assert check_case(run, budget=8).violations == []
    assert [s.label for s in run.snapshots] == ["closed", "redrive 1"]
    first = run.snapshots[0].ledger["refund"]
    assert (first["status"], first["attempts"]) == ("UNKNOWN", 4)
    execution = run.final.executions[run.owner_arn or ""]
    assert execution["retries_answered"] == []
    refund = run.final.ledger["refund"]
    assert refund["status"] == "UNKNOWN" and "escalated_at" in refund
    assert float(refund["escalated_at"]) > float(refund["first_dispatch_at"]) + DAY
    output = execution["output"] or {}
    assert (output.get("outcome"), output["escalation"]["reason"]) == (
        "ESCALATED",
        "OUTCOME_UNCERTAIN",
    )
    assert run.final.refunds == []


def test_a_record_a_release_before_the_rule_gave_a_retention_outlives_it_once_taken_over(
    local_aws: LocalAws,
) -> None:
    """The refund's record, left open by the first run, is given the retention the earlier
    release wrote; the redrive's delivery takes it over, refunds and dies; no reconciliation
    runs, the case escalates with the record open. 31 days on, past that retention, the record
    is still there (`open_record_kept`) and says what it did."""
    faults: dict[str, list[str]] = {}
    run = _shaped_run(
        local_aws, "case-legacy-retention", _legacy_retention_taken_over(faults), faults
    )

    assert check_case(run, budget=8).violations == []
    assert "legacy-retention:refund" in run.fired and "crash:refund:exited" in run.fired
    assert [s.label for s in run.snapshots] == ["closed", "redrive 1", "operator 1: jump"]
    taken = run.snapshots[1].ledger["refund"]
    assert (taken["status"], taken["attempts"]) == ("IN_PROGRESS", 5)
    assert "expires_at" not in taken
    kept = run.final.ledger["refund"]
    assert kept["status"] == "IN_PROGRESS" and kept["owner"] == taken["owner"]
    assert run.final.clock - run.snapshots[0].clock > 31 * DAY
    assert len(run.final.refunds) == 1


def test_a_case_decided_while_stopped_at_reconciliation_is_refused_by_its_redrive(
    local_aws: LocalAws,
) -> None:
    """A person stops the execution while ReconcileStep's invoke is in flight, resolves the
    case and redrives it: the redriven reconciliation meets the decision and the execution ends
    FAILED with ActionSettled (REFUSED), and nothing is queued for it."""
    faults: dict[str, list[str]] = {}
    run = _shaped_run(
        local_aws, "case-decided-reconciling", _decided_at_reconciliation(faults), faults
    )

    assert check_case(run, budget=8).violations == []
    assert run.fired == ["overlap:abort:refund:reconcile"]
    [decision] = run.operator
    assert (decision["step"], decision.get("resolved")) == ("resolve:in-flight", True)
    execution = run.final.executions[run.owner_arn or ""]
    assert (execution["status"], execution["error"]) == ("FAILED", "ActionSettled")
    assert execution["path"][-2:] == ["ReconcileStep", "CaseResolved"]
    # Nothing asks a person about the refused rerun (the stop's own message may come or not:
    # the local AWS publishes it when the stopped invoke ends, which can be after the redrive).
    assert [m for m in run.messages if m.get("status") != "ABORTED"] == []
    assert (run.final.case_record or {}).get("resolution")
    assert run.final.refunds == []
