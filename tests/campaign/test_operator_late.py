"""The operator's late deliveries after a person's decision reach the outcome's recording too."""

from __future__ import annotations

from sagactl.campaign.invariants import check_case
from sagactl.campaign.observe import Observer
from sagactl.campaign.paths import ESCALATE_STATE, SETTLED_ERROR
from sagactl.campaign.plan import CasePlan
from sagactl.campaign.runner import CaseRunner
from sagactl.local.environment import LocalAws
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
    resolved, after = run.snapshots[resolve["snapshot"]], run.snapshots[late["snapshot"]]
    assert after.case_record == resolved.case_record
    assert run.messages[late["messages_from"] : late["messages_to"]] == []
    assert check_case(run, budget=8).violations == []
