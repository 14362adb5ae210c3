"""Two deliveries of one action in flight at once on the local AWS (the overlap nemesis,
fault_campaign/overlap.py), each with one effect and an honest record; and the pieces the
nemesis is made of."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from fault_campaign.invariants import check_case
from fault_campaign.observe import Observer
from fault_campaign.overlap import (
    BOUNDARIES,
    STEP_STATES,
    OverlapMeter,
    boundary,
    plan_overlap,
)
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun, CaseRunner
from fault_campaign.shards import retry_waits_pass_on_the_clock
from local_aws.environment import LocalAws
from local_aws.invokes import HandlerRequest, Invocation
from tests.campaign.test_campaign_findings import _case


def _run(local: LocalAws, name: str, nemesis: dict[str, Any]) -> CaseRun:
    faults = {"shipment": ["reject"]} if nemesis["step"] == "release" else {}
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case(f"case-overlap-{name}", faults),
        nemeses=[{"kind": "overlap", **nemesis}],
    )
    run = CaseRunner(Observer(local)).run(plan)
    assert check_case(run, budget=8).violations == []
    return run


@pytest.fixture
def waits_pass_on_the_clock() -> Iterator[None]:
    """Retry waits move the local clock by what they skip, as in the campaign's shards (so a
    lease runs out during the `pending` retries that outlast it on AWS)."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    before = retrier_decl.time  # type: ignore[attr-defined]
    retry_waits_pass_on_the_clock()
    yield
    retrier_decl.time = before  # type: ignore[attr-defined]


def test_a_refund_delivery_hung_past_its_task_timeout_overlaps_reconciliation_and_refunds_once(
    local_aws: LocalAws,
) -> None:
    run = _run(local_aws, "hang", {"how": "hang", "step": "refund", "at": "dispatch"})

    assert run.fired == ["overlap:hang:refund:dispatch"]
    # IssueRefund's delivery and ReconcileStep's were in flight at once (and, when A is slow to
    # finish, ReconcileStep's retry after it found A's lease live: ActionPending, §3.5).
    assert set(run.overlaps) == {"refund"} and run.overlaps["refund"] >= 2
    execution = run.final.executions[run.owner_arn or ""]
    assert "States.Timeout" in [e["error"] for e in _failures(local_aws, execution["arn"])]
    assert execution["path"][1:5] == [
        "ReserveStock",
        "IssueRefund",
        "ReconcileStep",
        "AfterReconcile",
    ]
    assert (execution["status"], execution["output"]["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert len(run.final.refunds) == 1
    refund = run.final.ledger["refund"]
    assert (refund["status"], refund["attempts"]) == ("COMPLETED", 1)


def test_a_shipment_delivery_under_way_when_its_execution_is_aborted_and_redriven_ships_once(
    local_aws: LocalAws,
) -> None:
    run = _run(local_aws, "abort", {"how": "abort", "step": "ship", "at": "claim"})

    assert run.fired == ["overlap:abort:ship:claim"]
    # The stopped execution's delivery and the redriven one (and its retry, when it found the
    # action still held: ActionPending).
    assert set(run.overlaps) == {"ship"} and run.overlaps["ship"] >= 2
    execution = run.final.executions[run.owner_arn or ""]
    assert execution["redrive_count"] == 1
    assert Counter(execution["path"])["CreateShipment"] == 2
    assert (execution["status"], execution["output"]["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert len(run.final.shipments) == 1
    assert run.final.ledger["ship"]["status"] == "COMPLETED"


def test_a_shipment_delivery_running_past_its_task_timeout_keeps_its_claim_from_reconciliation(
    local_aws: LocalAws,
) -> None:
    """CreateShipment's delivery A waits at its dispatch past its task's timeout and goes on
    only once ReconcileStep's delivery B has ended: B meets A's claim while A still runs (on
    AWS until its function timeout), so A's lease is live (§3.2: it outlives the attempt): B
    writes nothing (ActionPending) and the carrier, which deduplicates nothing, ships once."""
    nemesis = {"how": "hang", "step": "ship", "at": "dispatch", "until": "b-done"}
    run = _run(local_aws, "outlive", nemesis)

    assert run.fired == ["overlap:hang:ship:dispatch"]  # nothing wrote over A's claim
    assert run.overlaps["ship"] >= 2
    execution = run.final.executions[run.owner_arn or ""]
    assert "ActionPending" in [e["error"] for e in _failures(local_aws, execution["arn"])]
    assert (execution["status"], execution["output"]["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert len(run.final.shipments) == 1
    ship = run.final.ledger["ship"]
    assert (ship["status"], ship["attempts"]) == ("COMPLETED", 1)


def test_a_stopped_case_is_not_resolved_while_a_refund_delivery_holds_its_action(
    local_aws: LocalAws,
) -> None:
    """The execution is stopped while IssueRefund's delivery waits at its dispatch (its lease
    live): the person's resolution is refused (§3.10) and settles nothing; the redrive goes on,
    the delivery refunds once and the case completes."""
    nemesis = {"how": "abort", "step": "refund", "at": "dispatch", "resolve": True}
    run = _run(local_aws, "resolve", nemesis)

    assert run.fired == ["overlap:abort:refund:dispatch"]
    [event] = run.operator
    assert (event["step"], event["action"], event["execution_status"]) == (
        "resolve:in-flight",
        "refund",
        "ABORTED",
    )
    assert event["clock"] < event["lease"]
    assert (event.get("resolved"), event.get("error")) == (None, "ActionInFlight")
    assert "is held by attempt" in event["message"] and "nothing was resolved" in event["message"]
    record = run.final.case_record or {}
    assert (record.get("outcome"), record.get("resolution")) == ("COMPLETED", None)
    assert len(run.final.refunds) == 1
    refund = run.final.ledger["refund"]
    assert (refund["status"], refund.get("resolution")) == ("COMPLETED", None)


@pytest.mark.usefixtures("waits_pass_on_the_clock")
def test_an_outcome_write_delayed_past_the_lease_leaves_the_settled_record_alone(
    local_aws: LocalAws,
) -> None:
    """The shipment is made, its answer lost; the delivery's UNKNOWN lands only after
    reconciliation found the shipment and settled the record: the write is refused (§3.3), so
    the record stays COMPLETED as the execution's output says."""
    run = _run(local_aws, "stale", {"how": "stale", "step": "ship", "at": "outcome"})

    assert run.fired == [
        "overlap:stale:ship",
        "dynamodb:internal_after:shipments:TransactWriteItems",
    ]
    assert run.overlaps["ship"] >= 2
    execution = run.final.executions[run.owner_arn or ""]
    assert execution["output"]["outcome"] == "COMPLETED"
    assert len(run.final.shipments) == 1
    ship = run.final.ledger["ship"]
    assert (ship["status"], ship["attempts"]) == ("COMPLETED", 1)
    assert ship["downstream_ref"] == run.final.shipments[0]["shipment_id"]


def test_the_person_acts_with_no_overlap_armed(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator acts after the case's faults are over (fault_campaign.operator): an
    overlap nemesis whose moment never came (a clean case runs no release) must not hold one of
    the person's deliveries (a late one, a redrive's)."""
    from fault_campaign import overlap
    from fault_campaign.operator import Operator

    armed_when_acting: list[list[dict[str, Any]]] = []

    def act(self: Operator, run: CaseRun, arns: list[str]) -> None:
        armed_when_acting.append([s.nemesis for s in overlap._Active.scenarios])

    monkeypatch.setattr(Operator, "act", act)
    nemesis = {"kind": "overlap", "how": "hang", "step": "release", "at": "claim"}
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case("case-overlap-operator", {}),
        nemeses=[nemesis],
        operator={"at": "closed", "steps": ["late"], "jump_days": 31},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert run.fired == [] and run.final.executions[run.owner_arn or ""]["status"] == "SUCCEEDED"
    assert armed_when_acting == [[]]


def _failures(local: LocalAws, arn: str) -> list[dict[str, str]]:
    return [
        event.get("taskFailedEventDetails") or event.get("taskTimedOutEventDetails") or {}
        for event in local.history(arn)
        if event["type"] in ("TaskFailed", "TaskTimedOut")
    ]


# --- the pieces --------------------------------------------------------------------------------
TABLES = {
    "ledger": "Ledger",
    "payments": "Payments",
    "shipments": "Shipments",
    "reservations": "Reservations",
}


def _request(operation: str, document: Mapping[str, object]) -> HandlerRequest:
    return HandlerRequest(None, "r", operation, json.dumps(document).encode())


def test_each_ledger_boundary_of_a_step_is_told_apart() -> None:
    claim = {"TableName": "Ledger", "Item": {"lease_expires_at": {"N": "40"}}}
    takeover = {
        "TableName": "Ledger",
        "UpdateExpression": "SET #owner = :me, lease_expires_at = :lease",
        "ExpressionAttributeValues": {":me": {"S": "b"}, ":lease": {"N": "80"}},
    }
    outcome = {
        "TableName": "Ledger",
        "UpdateExpression": "SET #status = :status",
        "ExpressionAttributeValues": {":me": {"S": "a"}, ":status": {"S": "COMPLETED"}},
    }
    settle = {
        "TableName": "Ledger",
        "UpdateExpression": "SET #status = :completed",
        "ExpressionAttributeValues": {":seen_status": {"S": "IN_PROGRESS"}},
    }
    refund = {"TransactItems": [{"Put": {"TableName": "Payments"}}]}
    reserve = {"TransactItems": [{"Put": {"TableName": "Ledger"}}, {"Put": {"TableName": "X"}}]}

    assert boundary(_request("PutItem", claim), TABLES, "refund") == "claim"
    assert boundary(_request("UpdateItem", takeover), TABLES, "refund") == "claim"
    assert boundary(_request("UpdateItem", outcome), TABLES, "refund") == "outcome"
    assert boundary(_request("UpdateItem", settle), TABLES, "refund") is None
    assert boundary(_request("TransactWriteItems", refund), TABLES, "refund") == "dispatch"
    assert boundary(_request("TransactWriteItems", refund), TABLES, "ship") is None
    assert boundary(_request("TransactWriteItems", reserve), TABLES, "reserve") == "claim"
    assert boundary(_request("GetItem", {"TableName": "Ledger"}), TABLES, "refund") is None


def _invocation(state: str, request_id: str, case_id: str = "c1") -> Invocation:
    event: dict[str, Any] = {"case": {"case_id": case_id}, "attempt": {"state": state}}
    if state == "ReconcileStep":
        event["step"] = "refund"
    return Invocation("f", event, request_id=request_id)


def test_the_meter_counts_deliveries_of_one_action_in_flight_at_once() -> None:
    meter = OverlapMeter("c1")
    forward, reconcile, later = (
        _invocation("IssueRefund", "a"),
        _invocation("ReconcileStep", "b"),
        _invocation("IssueRefund", "c"),
    )
    other_step, other_case = (
        _invocation("CreateShipment", "d"),
        _invocation("IssueRefund", "e", "c2"),
    )
    forward.started_real, reconcile.started_real, later.started_real = 1.0, 2.0, 5.0
    other_step.started_real = other_case.started_real = 1.5
    for each in (forward, reconcile, other_step, other_case):
        meter("start", each)
    forward.ended_real, reconcile.ended_real = 3.0, 4.0
    for each in (forward, reconcile):
        meter("end", each)
    meter("start", later)  # after both: overlaps nothing
    later.ended_real = 6.0
    meter("end", later)

    assert meter.overlaps() == {"refund": 2}


def test_a_few_cases_in_ten_get_an_overlap_of_every_kind() -> None:
    plans = [plan_overlap(7, index) for index in range(600)]
    chosen = [plan for plan in plans if plan is not None]

    assert 0.2 < len(chosen) / len(plans) < 0.4
    assert {(p["how"], p["step"]) for p in chosen} >= {("hang", step) for step in STEP_STATES} | {
        ("abort", "refund"),
        ("stale", "ship"),
    }
    assert {p["at"] for p in chosen if p["how"] != "stale"} == set(BOUNDARIES) | {"dispatch"}
    # A person resolves while A holds the action; B meets A's claim while A runs: only where A
    # holds it (claimed, before its outcome), and only for some hangs.
    holding = [p for p in chosen if p["at"] != "claim" and p["step"] != "reserve"]
    assert [p for p in chosen if p.get("resolve")] == [p for p in holding if p["how"] == "abort"]
    waits = [p for p in chosen if p.get("until") == "b-done"]
    assert waits and all(p in holding and p["how"] == "hang" for p in waits)
    assert len(waits) < len([p for p in holding if p["how"] == "hang"])
    assert plans == [plan_overlap(7, index) for index in range(600)]  # a pure function
