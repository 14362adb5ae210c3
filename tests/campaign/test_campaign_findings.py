"""Bugs the fault campaign found, each as its minimal reproduction through the real state machine.

Each test failed before its fix. A bug found but not yet fixed would be listed in
fault_campaign/known.py with its test marked xfail(strict); none is today.
"""

from __future__ import annotations

from typing import Any

from fault_campaign.approval import approve
from fault_campaign.invariants import check_case
from fault_campaign.observe import Observer
from fault_campaign.paths import classify
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun, CaseRunner
from local_aws.environment import LocalAws
from tests.e2e.test_saga_paths import load_example


def _case(case_id: str, faults: dict[str, list[str]]) -> dict[str, Any]:
    raw = load_example("happy-path")
    raw["case_id"] = case_id
    raw.pop("sandbox", None)
    raw["approval"] = {k: v for k, v in raw["approval"].items() if k != "digest"}
    case = approve(raw)
    case["sandbox"] = {"faults": faults}
    return case


def test_a_conflict_on_the_sandbox_fault_cursor_is_retried_like_any_transient_error(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 2, case 39, shrunk: the reserve delivery's read of its fault cursor (an
    UpdateItem on the sandbox table) meets a TransactionConflict. Nothing was sent: the step
    must be retried (TransientError), not fail the execution with botocore's error type."""
    plan = CasePlan(
        seed=2,
        index=39,
        case=_case("case-cursor-conflict", {"reserve": ["fail_before_commit"]}),
        nemeses=[
            {
                "kind": "dynamodb",
                "table": "sandbox",
                "operation": "UpdateItem",
                "error": "conflict",
                "match": "case",
                "skip": 1,
                "count": 1,
            }
        ],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert run.fired == ["dynamodb:conflict:sandbox:UpdateItem"]
    first = run.snapshots[0].executions[run.owner_arn or ""]
    assert first["task_errors"][0] == "TransientError"  # the sandbox's own fault, retried
    assert (first["status"], first["error"]) == ("SUCCEEDED", None), first["task_errors"]
    assert (first["output"] or {}).get("outcome") == "COMPLETED"


def _outcome_failing(
    local_aws: LocalAws,
    index: int,
    case_id: str,
    faults: dict[str, list[str]],
    error: str,
    *,
    tool: str = "RecordOutcome",
) -> CaseRun:
    """Campaign seed 1, case `index`, shrunk: every invoke of `tool` (the one that writes the
    case's outcome) answers `error` until its retries run out; then the cause is removed and
    the execution redriven."""
    nemesis = {"kind": "invoke_error", "tool": tool, "error": error}
    plan = CasePlan(
        seed=1,
        index=index,
        case=_case(case_id, faults),
        nemeses=[{**nemesis, "skip": 0, "count": 4}],
        redrives=[{"jump": 0, "heal": True}],
    )
    return CaseRunner(Observer(local_aws)).run(plan)


def test_an_outcome_record_that_fails_after_the_release_is_a_pending_compensation(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, case 1142, shrunk: the carrier rejects the shipment, the reservation is
    released (the case record says COMPENSATION_PENDING), then RecordOutcome (invoked at
    Escalate) is throttled past its retries. The execution is FAILED with the compensation
    pending, which a redrive finishes: an honest state the checker took for a forward failure
    with a disagreeing record (the product was right; the oracle was wrong)."""
    run = _outcome_failing(
        local_aws,
        1142,
        "case-outcome-throttled",
        {"shipment": ["reject"]},
        "Lambda.TooManyRequestsException",
    )

    closed, redriven = run.snapshots[0], run.snapshots[-1]
    first = closed.executions[run.owner_arn or ""]
    assert (first["status"], first["last_state"]) == ("FAILED", "Escalate")  # RecordOutcome there
    assert first["error"] == "Lambda.TooManyRequestsException"
    assert (closed.case_record or {}).get("outcome") == "COMPENSATION_PENDING"
    assert classify(first) == "COMPENSATION_PENDING"
    after = redriven.executions[run.owner_arn or ""]
    assert (after["status"], (after["output"] or {}).get("outcome")) == ("SUCCEEDED", "ESCALATED")
    assert (redriven.case_record or {}).get("outcome") == "ESCALATED"
    assert check_case(run, budget=8).violations == []


def test_an_outcome_recorded_whose_answer_was_lost_is_resumable(local_aws: LocalAws) -> None:
    """Campaign seed 1, case 1560, shrunk (the outcome now written with the shipment,
    docs/design.md §3.11): CreateShipment ships and writes COMPLETED, then every invoke of it
    fails after the function ran (Lambda.ServiceException: its answer lost) until the retries
    run out. Each redelivery finds the case record COMPLETED and answers the recorded shipment
    (never refused as a case no longer under way, never sent again); the execution is FAILED at
    CreateShipment with the record already COMPLETED, the effects all done; a redrive answers
    the shipment again and succeeds."""
    run = _outcome_failing(
        local_aws,
        1560,
        "case-outcome-answer-lost",
        {},
        "Lambda.ServiceException",
        tool="CreateShipment",
    )

    closed, redriven = run.snapshots[0], run.snapshots[-1]
    first = closed.executions[run.owner_arn or ""]
    assert (first["status"], first["last_state"]) == ("FAILED", "CreateShipment")
    assert first["error"] == "Lambda.ServiceException"
    assert (closed.case_record or {}).get("outcome") == "COMPLETED"
    assert (len(closed.refunds), len(closed.shipments)) == (1, 1)
    after = redriven.executions[run.owner_arn or ""]
    assert (after["status"], (after["output"] or {}).get("outcome")) == ("SUCCEEDED", "COMPLETED")
    assert (len(redriven.refunds), len(redriven.shipments)) == (1, 1)
    assert check_case(run, budget=8).violations == []


def test_a_rejection_after_a_redrive_of_a_throttled_validation_is_a_rejection(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, case 3115, shrunk: a case changed after its approval, whose ValidateCase
    is throttled (before it runs) past its retries: FAILED at ValidateCase, nothing recorded.
    The redrive validates it and rejects it (ApprovalMismatch), entering ValidateCase a second
    time. The checker wanted the path of a first-try rejection exactly (the oracle, once more)."""
    case = _case("case-rejected-on-redrive", {})
    case["refund"] = {**case["refund"], "amount_minor": case["refund"]["amount_minor"] + 1}
    throttled = {"kind": "invoke_error", "tool": "ValidateCase"}
    plan = CasePlan(
        seed=1,
        index=3115,
        case=case,
        expect_rejection="ApprovalMismatch",
        nemeses=[{**throttled, "error": "Lambda.TooManyRequestsException", "skip": 0, "count": 4}],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed, redriven = run.snapshots[0], run.snapshots[-1]
    first = closed.executions[run.owner_arn or ""]
    assert (first["status"], first["last_state"]) == ("FAILED", "ValidateCase")
    assert closed.case_record is None
    after = redriven.executions[run.owner_arn or ""]
    assert after["path"] == ["ValidateCase", "ValidateCase", "RejectCase"]
    assert (after["status"], after["error"]) == ("FAILED", "ApprovalMismatch")
    assert (redriven.refunds, redriven.shipments, redriven.reservations) == ([], [], [])
    assert check_case(run, budget=8).violations == []


def test_a_case_generated_to_be_rejected_that_ran_is_a_violation(local_aws: LocalAws) -> None:
    """Found by `make mutate` (four-eyes-fail-closed survived the campaign slice): an
    above-threshold case signed by one approver, which a broken rule let run to COMPLETED, was
    checked by nothing, since the rejection checks run only on executions that were rejected.
    The oracle now says that a case generated to be rejected was. Here a case signed properly is
    planned as if it were short of an approver: it completes, and that is the violation."""
    plan = CasePlan(
        seed=20261,
        index=0,
        case=_case("case-should-be-rejected", {}),
        expect_rejection="ApprovalInvalid",
        four_eyes="once",
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert classify(run.final.executions[run.owner_arn or ""]) == "COMPLETED"
    violations = check_case(run, budget=8).violations
    assert [v["invariant"] for v in violations] == ["invalid_case_rejected"]
    assert "ApprovalInvalid) ended COMPLETED" in violations[0]["detail"]


def test_a_reconcile_tool_that_dies_as_the_refund_in_flight_commits_is_escalated_honestly(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 7, case 136 (issue 24's 1,000-case run), shrunk: the provider keeps the
    refund in flight (no answer, OutcomeUnknown); ReconcileStep's lookup is what commits it, and
    the crash nemesis (armed on the refund's commit) kills the reconcile tool right there
    (Sandbox.Timedout). ReconcileStep's catch-all escalates: RECONCILIATION_FAILED at refund,
    with the refund made once and its record still UNKNOWN (open: the sweeper reports it). The
    new oracle found no planned fault on the reconcile tool and flagged it; the state is honest
    (the person is told to check the refund by its business reference), and the fault that
    makes it so is `crash:refund+in_flight` (fault_campaign/honesty.py)."""
    plan = CasePlan(
        seed=7,
        index=136,
        case=_case("case-reconcile-dies", {"refund": ["in_flight"]}),
        nemeses=[
            {"kind": "crash", "effect": "refund", "nth": 1, "answer": "timed_out", "jump": 45}
        ],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed = run.snapshots[0]
    owner = closed.executions[run.owner_arn or ""]
    assert run.fired == ["crash:refund:timed_out"]
    assert owner["task_errors"] == ["OutcomeUnknown", "Sandbox.Timedout"]
    escalation = (owner["output"] or {})["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("RECONCILIATION_FAILED", "refund")
    assert len(closed.refunds) == 1 and closed.shipments == []
    assert closed.ledger["refund"]["status"] == "UNKNOWN"
    assert closed.reservations[0]["status"] == "HELD"
    assert check_case(run, budget=8).violations == []


def test_a_blocked_release_whose_failed_record_expired_released_nothing(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 79, case 209 (a 400-case run at 6d2aa91), shrunk: a foreign request holds
    the shipment's key IN_PROGRESS, so the shipment is refused and the release is blocked (the
    stock may have shipped); the escalation message says so, with nothing compensated. The
    operator then moves the clock 60 days: the release's FAILED record expires. The oracle
    read "the release record expired" as "released" and flagged the message. An expired FAILED
    record stands for no release; the stock is still held and nothing was compensated."""
    plan = CasePlan(
        seed=79,
        index=209,
        case=_case("case-blocked-release-expires", {}),
        nemeses=[{"kind": "foreign_record", "operation": "ship"}],
        operator={"at": "end", "steps": ["late", "jump", "late"], "jump_days": 60},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed, after_jump = run.snapshots[0], run.snapshots[2]
    escalation = (closed.executions[run.owner_arn or ""]["output"] or {})["escalation"]
    assert escalation["step"] == "ship" and escalation["compensation_blocked"]
    assert closed.ledger["release"]["status"] == "FAILED"
    assert "release" not in after_jump.ledger  # closed, and its retention passed
    assert [r["status"] for r in after_jump.reservations] == ["HELD"]
    assert check_case(run, budget=8).violations == []


def _unreconciled_refund(
    index: int,
    case_id: str,
    error: str,
    overlap: dict[str, str],
    operator: dict[str, Any] | None = None,
) -> CasePlan:
    """Seed 1's 10,000-case findings, shrunk: the overlap nemesis on the refund while every
    invoke of the reconcile tool fails with `error`, so ReconcileStep gives up."""
    return CasePlan(
        seed=1,
        index=index,
        case=_case(case_id, {}),
        nemeses=[
            {
                "kind": "invoke_error",
                "tool": "ReconcileAction",
                "error": error,
                "skip": 0,
                "count": 4,
            },
            {"kind": "overlap", "step": "refund", **overlap},
        ],
        operator=operator,
    )


def test_a_lost_refund_answer_that_reconciliation_cannot_look_up_stays_open_and_escalates(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, case 153 (the 10,000-case run at e843c85), shrunk: the overlap
    nemesis's `stale` form loses the refund's answer after the refund was made and holds the
    delivery's outcome write; the task times out and every invoke of the reconcile tool fails
    (Lambda.ServiceException), so nothing can confirm the refund. The case escalates
    RECONCILIATION_FAILED at refund with the refund's record open (a possible dispatch: the
    person is told to look it up). The oracle allowed an unconfirmed effect only for the
    sandbox's lost answers, not the overlap's; `overlap:<step>:stale` now names it. (The case
    closes while that delivery still runs, as on AWS after a task timeout: its record is still
    IN_PROGRESS under it, and its UNKNOWN write lands afterwards.)"""
    plan = _unreconciled_refund(
        153,
        "case-stale-refund-unreconciled",
        "Lambda.ServiceException",
        {"how": "stale", "at": "outcome"},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed = run.snapshots[0]
    escalation = (closed.executions[run.owner_arn or ""]["output"] or {})["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("RECONCILIATION_FAILED", "refund")
    assert len(closed.refunds) == 1 and closed.shipments == []
    record = closed.ledger["refund"]  # still the hung delivery's: it writes UNKNOWN later
    assert record["status"] == "IN_PROGRESS" and "#IssueRefund#" in record["owner"]
    assert check_case(run, budget=8).violations == []


def test_a_delivery_that_writes_its_outcome_after_the_settlement_leaves_the_decision(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, case 6475 (the 10,000-case run at c60fb1f), shrunk: as in case 153, the
    refund's answer is lost and its delivery's outcome write held past its lease, and no
    reconcile tool invoke succeeds: the case escalates RECONCILIATION_FAILED with the refund's
    record IN_PROGRESS. A person resolves it (the lease has run out: the settlement is allowed),
    then a plain redrive comes. The held write lands over the settlement, as §3.10 designs it:
    the record takes the delivery's UNKNOWN and keeps the resolution, out of the open-actions
    index, with no retention; the redrive is refused (the execution succeeded). The oracle read
    the status change as the settlement not holding; `outcome-after-settlement` now names the
    fault."""
    plan = _unreconciled_refund(
        6475,
        "case-outcome-after-settlement",
        "Lambda.TooManyRequestsException",
        {"how": "stale", "at": "outcome"},
        operator={"at": "end", "steps": ["resolve", "redrive:plain"], "jump_days": 31},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed, last = run.snapshots[0], run.snapshots[-1]
    assert closed.ledger["refund"]["status"] == "IN_PROGRESS"
    resolve, redrive = run.operator
    assert resolve["step"] == "resolve" and resolve.get("error") is None, resolve
    refund = last.ledger["refund"]
    assert refund["status"] == "UNKNOWN" and refund["resolution"]["by"] == "operator@campaign"
    assert not {"open_status", "expires_at"} & set(refund)
    assert len(last.refunds) == 1 and last.shipments == []
    assert (redrive["step"], redrive.get("refused")) == ("redrive:plain", "ExecutionNotRedrivable")
    assert check_case(run, budget=8).violations == []
    # The same states without the fault that held the write are violations: nothing else
    # lets a settled record change.
    run.plan.nemeses = [n for n in run.plan.nemeses if n["kind"] != "overlap"]
    found = {v["invariant"] for v in check_case(run, budget=8).violations}
    assert "resolution_settles" in found or "resolved_case_never_acts" in found, found


def test_a_hung_refund_delivery_that_completes_after_reconciliation_gave_up_is_not_reported(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, cases 7445 and 7500 (the 10,000-case run at c60fb1f), shrunk: the
    refund's first delivery hangs past its task's timeout at its outcome write until the next
    delivery is done (the overlap nemesis's `hang`, `until: b-done`), and no reconcile tool
    invoke succeeds (Lambda.TooManyRequestsException). ReconcileStep gives up: the case
    escalates RECONCILIATION_FAILED at refund, the refund unconfirmed; then the hung delivery
    records it COMPLETED. The escalation was honest when it was decided and the ledger is now
    right; the oracle allowed that only for a reconcile tool whose answer was lost after it
    recorded the effect. `overlap:<step>:hang` now names this fault too."""
    plan = _unreconciled_refund(
        7445,
        "case-hung-refund-unreported",
        "Lambda.TooManyRequestsException",
        {"how": "hang", "at": "outcome", "until": "b-done"},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed = run.snapshots[0]
    output = closed.executions[run.owner_arn or ""]["output"] or {}
    escalation = output["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("RECONCILIATION_FAILED", "refund")
    assert "refund" not in (output.get("steps") or {})
    assert closed.ledger["refund"]["status"] == "COMPLETED"
    assert len(closed.refunds) == 1 and closed.shipments == []
    assert check_case(run, budget=8).violations == []
    run.plan.nemeses = [n for n in run.plan.nemeses if n["kind"] != "overlap"]
    found = {v["invariant"] for v in check_case(run, budget=8).violations}
    assert "confirmed_effects_reported" in found, found


def test_a_refund_delivery_still_hung_when_the_case_escalates_holds_its_record_open(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 1, case 8883 (the 10,000-case run at c60fb1f), shrunk: the refund's first
    delivery hangs past its task's timeout at its outcome write (the overlap nemesis's `hang`),
    and no reconcile tool invoke succeeds. The case escalates RECONCILIATION_FAILED at refund
    while that delivery still holds the refund's record IN_PROGRESS, the refund made: an
    unconfirmed effect under a live delivery, which the person is told to check. The oracle
    allowed that for lost answers only; `overlap:<step>:hang` now names this fault too."""
    plan = _unreconciled_refund(
        8883,
        "case-hung-refund-open",
        "Lambda.TooManyRequestsException",
        {"how": "hang", "at": "outcome"},
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    closed = run.snapshots[0]
    escalation = (closed.executions[run.owner_arn or ""]["output"] or {})["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("RECONCILIATION_FAILED", "refund")
    assert len(closed.refunds) == 1 and closed.shipments == []
    # IN_PROGRESS while the delivery waits (its 15 s hold outlasts the reconcile retries); on
    # a machine too slow for that, it has recorded the refund (cases 7445, 7500) by the close
    assert closed.ledger["refund"]["status"] in ("IN_PROGRESS", "COMPLETED")
    assert check_case(run, budget=8).violations == []
    run.plan.nemeses = [n for n in run.plan.nemeses if n["kind"] != "overlap"]
    assert check_case(run, budget=8).violations != []
