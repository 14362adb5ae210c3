"""The campaign's plan shapes (sagactl/campaign/shapes.py) through the real state machine: each
reaches the state it is drawn for, and the case stays honest there."""

from __future__ import annotations

import random

import pytest

from sagactl.campaign.generator import generate
from sagactl.campaign.invariants import check_case
from sagactl.campaign.observe import Observer
from sagactl.campaign.orchestrate import SLICE_BLOCK_SIZE, SLICE_CASES, SLICE_SEED
from sagactl.campaign.plan import CasePlan
from sagactl.campaign.runner import CaseRunner
from sagactl.campaign.shapes import _delayed_release, _old_execution, shape
from sagactl.local.environment import LocalAws
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
