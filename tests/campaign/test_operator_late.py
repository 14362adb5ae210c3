"""The person's decisions in the campaign: late deliveries after a resolution reach the outcome's
recording too; a decision during an overlap is judged on the clock it was read with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from fault_campaign.checks import Checks
from fault_campaign.invariants import check_case
from fault_campaign.observe import Observer, Snapshot
from fault_campaign.operator_checks import OperatorChecker
from fault_campaign.overlap import RESOLVE_IN_FLIGHT
from fault_campaign.paths import APPROVAL_ERROR, ESCALATE_STATE, FORWARD_STATES, SETTLED_ERROR
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun, CaseRunner
from local_aws.environment import LocalAws
from saga.ledger.records import SETTLE_SKEW_SECONDS
from tests.campaign.test_campaign_findings import _case


def test_a_stray_escalation_delivery_after_the_resolution_is_refused_and_queues_nothing(
    local_aws: LocalAws,
) -> None:
    """A foreign request holds the shipment's key: the case escalates. A person resolves it;
    then the last delivery of every task arrives again, Escalate's among them (a stray retry).
    §3.10: the record's write is refused (ActionSettled) before any message is queued, so the
    case record and the queue are as the decision left them. Without Escalate among the late
    deliveries no campaign case reached that refusal (the mutants resolved-case-record and
    escalate-before-the-record survived the slice)."""
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case("case-late-escalate", {}),
        nemeses=[{"kind": "foreign_record", "operation": "ship"}],
        operator={"at": "end", "steps": ["resolve", "late"], "jump_days": 31},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    resolve, late = run.operator
    assert resolve.get("resolved") is True, resolve
    assert late["answers"][ESCALATE_STATE] == SETTLED_ERROR, late["answers"]
    # Each forward delivery again with an amount nobody approved: refused before anything else.
    assert late["tampered"] == dict.fromkeys(FORWARD_STATES.values(), APPROVAL_ERROR)
    resolved, after = run.snapshots[resolve["snapshot"]], run.snapshots[late["snapshot"]]
    assert after.case_record == resolved.case_record
    assert run.messages[late["messages_from"] : late["messages_to"]] == []
    assert check_case(run, budget=8).violations == []


def _in_flight_decision(*, lease: float, clock_after: float, resolved: bool) -> list[str]:
    event = {
        "step": RESOLVE_IN_FLIGHT,
        "action": "refund",
        "at": "dispatch",
        "execution_status": "ABORTED",
        "lease": lease,
        "clock": 1000.0,
        "clock_after": clock_after,
        **({"resolved": True, "settled": ["k"]} if resolved else {"error": "ActionInFlight"}),
    }
    checks = Checks()
    run = cast(CaseRun, SimpleNamespace(operator=[event]))
    OperatorChecker(run, checks, lambda *_: False).all()
    return [v["invariant"] for v in checks.violations]


def test_a_settlement_of_a_lease_live_until_after_the_decision_is_a_violation() -> None:
    """Seed 20261 case 203 on a loaded machine: the decision was read at 1000 with the lease
    live until 1040, and answered after the lease (and the clocks' skew) had run out. The
    settling clock was read in between, so only a lease still live when the decision returned
    proves the product settled a live one."""
    live_after = 1040.0 + SETTLE_SKEW_SECONDS + 1  # the decision returned after the lease ran out
    assert _in_flight_decision(lease=1040.0, clock_after=live_after, resolved=True) == []
    assert _in_flight_decision(lease=1040.0, clock_after=1039.0, resolved=True) == [
        "settle_refuses_live_lease"
    ]
    assert _in_flight_decision(lease=1040.0, clock_after=1039.0, resolved=False) == []


def test_a_delivery_with_unapproved_parameters_that_a_tool_does_not_refuse_is_a_violation() -> None:
    """The mutant per-tool-approval (IssueRefund skips the digest check): its late delivery
    with a changed amount meets the next check instead (here the closed case's)."""
    before = Snapshot("closed", 1000.0, {}, {"outcome": "COMPLETED"}, [], [], [], {})
    after = Snapshot("operator 1: late", 1000.0, {}, {"outcome": "COMPLETED"}, [], [], [], {})
    event = {"step": "late", "snapshot": 1, "answers": {}}
    for tampered, found in (
        ({"IssueRefund": APPROVAL_ERROR}, []),
        ({"IssueRefund": "AuthorizationDenied"}, ["unapproved_parameters_refused"]),
    ):
        checks = Checks()
        run = cast(CaseRun, SimpleNamespace(operator=[{**event, "tampered": tampered}]))
        run.snapshots = [before, after]
        OperatorChecker(run, checks, lambda *_: False).all()
        assert [v["invariant"] for v in checks.violations] == found


def test_a_resolution_refused_for_a_lease_inside_the_clocks_skew_is_honest() -> None:
    """§3.10: a lease counts as live until SETTLE_SKEW_SECONDS after it ends, so a person's
    decision 100 s after the lease ended is refused ActionInFlight, as it should be."""
    lease = {"status": "IN_PROGRESS", "owner": "a", "lease_expires_at": 900}
    for ended, found in ((100, []), (SETTLE_SKEW_SECONDS + 1, ["resolve_only_open"])):
        clock = 900.0 + ended
        record = {"outcome": "ESCALATED"}
        before = Snapshot("closed", clock, {"refund": lease}, record, [], [], [], {})
        after = Snapshot("operator 1", clock, {"refund": lease}, before.case_record, [], [], [], {})
        event = {"step": "resolve", "snapshot": 1, "error": "ActionInFlight", "message": "held"}
        checks = Checks()
        run = cast(CaseRun, SimpleNamespace(operator=[event], snapshots=[before, after]))
        run.owner_arn = None
        OperatorChecker(run, checks, lambda *_: False).all()
        assert [v["invariant"] for v in checks.violations] == found
