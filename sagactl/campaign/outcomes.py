"""The outcome invariants of a case's executions (sagactl/campaign/invariants.py lists them
all): each ends in a state of the closed list, agreeing with the case record, the ledger, the
effects and the escalation queue; at most one runs forward; the oracle (a clean case
completes, a valid one is never rejected, one generated invalid always is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagactl.campaign.checks import Checks, fields_of
from sagactl.campaign.observe import Snapshot
from sagactl.campaign.runner import REJECTIONS, CaseRun
from stacks.lambda_errors import LAMBDA_CRASH_ERRORS, LAMBDA_INVOKE_ERRORS

FORWARD_STATES = frozenset(
    {"ValidateCase", "ReserveStock", "IssueRefund", "CreateShipment", "RecordOutcome"}
)
RETRIED_OUT_ERRORS = frozenset({"TransientError", "ActionPending", *LAMBDA_INVOKE_ERRORS})
ESCALATION_REASONS = frozenset(
    {
        "OUT_OF_STOCK",
        "REFUND_REJECTED",
        "SHIPMENT_REJECTED",
        "REJECTED_AFTER_EFFECTS",
        "OUTCOME_UNCERTAIN",
        "RECONCILIATION_FAILED",
    }
)
OUTCOME_CLASSES = (
    "COMPLETED",
    "ESCALATED",
    "DUPLICATE",
    "REJECTED",
    "FAILED_RESUMABLE",
    "COMPENSATION_PENDING",
)
STEP_OPERATIONS = {"reserve": "reserve", "refund": "refund", "ship": "ship"}


def classify(execution: Mapping[str, Any]) -> str:
    """The terminal class of one execution (an unknown one is reported as is)."""
    status = execution["status"]
    output = execution.get("output") or {}
    if status == "SUCCEEDED":
        return str(output.get("outcome", "SUCCEEDED?"))
    if status == "FAILED" and execution.get("error") in REJECTIONS:
        return "REJECTED"
    if status == "FAILED" and execution.get("last_state") == "ReleaseReservation":
        return "COMPENSATION_PENDING"
    # The release marked the case COMPENSATION_PENDING; only the outcome's record failed since.
    if (
        status == "FAILED"
        and execution.get("last_state") == "RecordOutcome"
        and "ReleaseReservation" in execution.get("path", ())
    ):
        return "COMPENSATION_PENDING"
    if status == "FAILED" and execution.get("last_state") in FORWARD_STATES:
        return "FAILED_RESUMABLE"
    return f"{status}@{execution.get('last_state')}"


def _redrives_folded(path: list[str]) -> list[str]:
    """The path with each state a redrive entered again folded into one: a redrive resumes at
    the state that failed, so it is entered twice in a row (the saga has no loop of one state)."""
    return [state for i, state in enumerate(path) if i == 0 or path[i - 1] != state]


class OutcomeChecker:
    def __init__(
        self, run: CaseRun, budget: int, checks: Checks, last_seen: Mapping[str, Any]
    ) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        # Each operation's ledger record as last seen (kept by the effect checks).
        self.last_seen = last_seen

    # -- executions ------------------------------------------------------------------------
    def executions(self, snap: Snapshot, *, final: bool) -> None:
        check = self.checks.check
        record = snap.case_record
        forward = [e for e in snap.executions.values() if "ReserveStock" in e["path"]]
        check(
            "one_execution_runs_forward",
            len(forward) <= 1,
            f"{snap.label}: {[e['name'] for e in forward]} ran forward",
        )
        owner = (record or {}).get("execution_arn")
        for arn, execution in snap.executions.items():
            kind = classify(execution)
            name = execution["name"]
            if execution["status"] == "RUNNING":
                check("terminal_state", False, f"{snap.label}: {name} still RUNNING")
                continue
            check("terminal_state", kind in OUTCOME_CLASSES, f"{snap.label}: {name} ended {kind}")
            if kind == "DUPLICATE":
                output = execution["output"] or {}
                check(
                    "duplicate_has_no_effect",
                    _redrives_folded(execution["path"])
                    == ["ValidateCase", "NewOrDuplicate", "DuplicateCase"]
                    and output.get("original_execution_arn") == owner
                    and arn != owner,
                    f"{snap.label}: {name} path {execution['path']} points at "
                    f"{output.get('original_execution_arn')}, owner {owner}",
                )
            elif kind == "REJECTED":
                self._rejected(snap, arn, execution)
            elif kind in ("COMPLETED", "ESCALATED"):
                check(
                    "case_record_agrees",
                    record is not None
                    and record.get("outcome") == kind
                    and record.get("execution_arn") == arn,
                    f"{snap.label}: {name} {kind}, case record "
                    f"{fields_of(record, 'outcome', 'execution_arn')}",
                )
                self._steps_agree(snap, execution)
                if kind == "COMPLETED":
                    self._completed(snap, execution)
                else:
                    self._escalated(snap, execution)
            elif kind in ("FAILED_RESUMABLE", "COMPENSATION_PENDING"):
                self._failed(snap, arn, execution, kind, final=final)

    def _steps_agree(self, snap: Snapshot, execution: Mapping[str, Any]) -> None:
        steps = (execution.get("output") or {}).get("steps") or {}
        for step, result in steps.items():
            record = snap.ledger.get(STEP_OPERATIONS.get(step, step))
            if record is None and self.last_seen.get(step) is not None:
                continue  # expired since (retention passed between a close and a redrive)
            self.checks.check(
                "outputs_agree_with_ledger",
                record is not None
                and record.get("status") == "COMPLETED"
                and record.get("action_key") == result.get("action_key")
                and record.get("downstream_ref") == result.get("downstream_ref"),
                f"{snap.label}: output step {step} {result.get('downstream_ref')} vs ledger "
                f"{fields_of(record, 'status', 'downstream_ref')}",
            )

    def _completed(self, snap: Snapshot, execution: Mapping[str, Any]) -> None:
        reservation = snap.reservations[0] if snap.reservations else {}
        self.checks.check(
            "completed_means_done",
            len(snap.refunds) == 1
            and len(snap.shipments) == 1
            and reservation.get("status") == "HELD",
            f"{snap.label}: COMPLETED with {len(snap.refunds)} refunds, {len(snap.shipments)} "
            f"shipments, reservation {reservation.get('status')}",
        )
        self.checks.check(
            "queue_agrees",
            not self._messages(execution["arn"], "CASE_ESCALATED"),
            f"{snap.label}: COMPLETED but an escalation message was sent",
        )

    def _escalated(self, snap: Snapshot, execution: Mapping[str, Any]) -> None:
        check = self.checks.check
        escalation = (execution.get("output") or {}).get("escalation") or {}
        reason = escalation.get("reason")
        step = escalation.get("step")
        reservation = snap.reservations[0] if snap.reservations else None
        check("escalation_reason", reason in ESCALATION_REASONS, f"{snap.label}: reason {reason}")
        messages = self._messages(execution["arn"], "CASE_ESCALATED")
        check(
            "queue_agrees",
            bool(messages) and all(m.get("reason") == reason for m in messages),
            f"{snap.label}: ESCALATED {reason}, messages {[m.get('reason') for m in messages]}",
        )
        if reason == "OUT_OF_STOCK":
            check(
                "escalation_honest",
                not snap.refunds and not snap.shipments and reservation is None,
                f"{snap.label}: OUT_OF_STOCK with effects {len(snap.refunds)} refunds, "
                f"{len(snap.shipments)} shipments, reservation {reservation}",
            )
        compensating = reason in ("REFUND_REJECTED", "SHIPMENT_REJECTED") or (
            reason == "REJECTED_AFTER_EFFECTS" and step in ("refund", "ship")
        )
        if compensating:
            blocked = escalation.get("compensation_blocked")
            released = reservation is not None and reservation.get("status") == "RELEASED"
            check(
                "compensated_or_said_so",
                not snap.shipments
                and (released or (blocked and reservation is None) or bool(blocked)),
                f"{snap.label}: {reason} at {step}: shipments {len(snap.shipments)}, reservation "
                f"{None if reservation is None else reservation.get('status')}, blocked {blocked}",
            )
            if released and not blocked:
                check(
                    "compensated_or_said_so",
                    bool((execution.get("output") or {}).get("compensations")),
                    f"{snap.label}: released but no compensation in the output",
                )
        if reason == "REFUND_REJECTED":
            check(
                "escalation_honest",
                not snap.refunds,
                f"{snap.label}: REFUND_REJECTED with a refund",
            )
        # Every confirmed effect in the output exists.
        for step_name in (execution.get("output") or {}).get("steps") or {}:
            present = {
                "reserve": reservation is not None,
                "refund": bool(snap.refunds),
                "ship": bool(snap.shipments),
            }.get(step_name, True)
            check(
                "escalation_honest", present, f"{snap.label}: confirmed {step_name} has no effect"
            )

    def _rejected(self, snap: Snapshot, arn: str, execution: Mapping[str, Any]) -> None:
        check = self.checks.check
        error = execution.get("error")
        check(
            "rejected_at_validation",
            _redrives_folded(execution["path"]) == ["ValidateCase", "RejectCase"],
            f"{snap.label}: {execution['name']} {error} path {execution['path']}",
        )
        duplicate = self.run.plan.duplicate or {}
        is_changed = duplicate.get("when") == "changed" and execution["name"].endswith("-again")
        expected = "KeyConflict" if is_changed else self.run.plan.expect_rejection
        check(
            "rejection_expected",
            error == expected,
            f"{snap.label}: {execution['name']} rejected with {error}, expected {expected}",
        )
        if not is_changed and self.run.plan.expect_rejection is not None:
            check(
                "rejection_has_no_effect",
                not snap.refunds
                and not snap.shipments
                and not snap.reservations
                and not snap.ledger
                and snap.case_record is None,
                f"{snap.label}: rejected case left {len(snap.ledger)} records, case record "
                f"{snap.case_record is not None}",
            )

    def _failed(
        self, snap: Snapshot, arn: str, execution: Mapping[str, Any], kind: str, *, final: bool
    ) -> None:
        check = self.checks.check
        record = snap.case_record
        error = execution.get("error")
        state = execution.get("last_state")
        check(
            "failed_after_transient_retries",
            error in RETRIED_OUT_ERRORS
            or (
                kind == "COMPENSATION_PENDING"
                and error
                in ("OutcomeUnknown", "BudgetExhausted", "States.Timeout", *LAMBDA_CRASH_ERRORS)
            ),
            f"{snap.label}: {execution['name']} FAILED at {state} with {error}: "
            f"{str(execution.get('cause'))[:400]}",
        )
        outcomes: tuple[str, ...] = (
            ("COMPENSATION_PENDING", "IN_PROGRESS")
            if kind == "COMPENSATION_PENDING"
            else ("IN_PROGRESS",)
        )
        if state == "RecordOutcome":
            # The record may already be written: an invoke that failed after the function ran.
            outcomes += ("ESCALATED" if "Escalate" in execution["path"] else "COMPLETED",)
        if state != "ValidateCase" or record is not None:
            check(
                "case_record_agrees",
                record is not None and record.get("outcome") in outcomes,
                f"{snap.label}: FAILED at {state}, case record "
                f"{None if record is None else record.get('outcome')}",
            )
        check(
            "queue_agrees",
            bool(self._messages(arn, "EXECUTION_NOT_SUCCEEDED")),
            f"{snap.label}: FAILED at {state} and no message on the escalation queue",
        )
        if final:
            operation = {
                "ReserveStock": "reserve",
                "IssueRefund": "refund",
                "CreateShipment": "ship",
                "ReleaseReservation": "release",
            }.get(str(state))
            ledger = snap.ledger.get(operation or "") or {}
            check(
                "redrive_finishes",
                int(ledger.get("attempts", 0)) >= self.budget or error == "BudgetExhausted",
                f"{snap.label}: still FAILED at {state} ({error}) after the cause was removed and "
                f"a redrive; {operation} attempts {ledger.get('attempts')}/{self.budget}",
            )

    def _messages(self, arn: str, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.run.messages if m.get("kind") == kind and m.get("execution") == arn]

    # -- the oracle ------------------------------------------------------------------------
    def oracle(self) -> None:
        plan = self.run.plan
        owner = self.run.final.executions.get(self.run.owner_arn or "")
        if owner is None:
            return
        kind = classify(owner)
        if plan.expect_rejection is None:
            self.checks.check(
                "valid_case_not_rejected",
                kind != "REJECTED",
                f"valid case rejected: {owner.get('error')}: {owner.get('cause')}",
            )
        else:
            # Its error is checked with the rejection (_rejected); here, that it was rejected
            # at all: an invalid case (or one short of four eyes) that ran is the worst outcome.
            self.checks.check(
                "invalid_case_rejected",
                kind == "REJECTED",
                f"a case generated to be rejected ({plan.expect_rejection}) ended {kind}",
            )
        quantity = int(plan.case["reserve"]["quantity"])
        clean = (
            plan.expect_rejection is None
            and not plan.faults
            and not self.run.fired
            and self.run.stock_before is not None
            and self.run.stock_before >= quantity
        )
        if clean:
            self.checks.check(
                "clean_case_completes",
                kind == "COMPLETED",
                f"a case without faults and with stock ended {kind}",
            )

    def same_name(self) -> None:
        """A StartExecution with the case's name answered as Step Functions does."""
        if self.run.same_name is None:
            return
        arn = self.run.owner_arn
        seen = self.run.same_name
        self.checks.check(
            "same_name_is_same_execution",
            seen.get("while_open") in (None, arn)
            or seen.get("while_open") in self.run.final.executions,
            f"StartExecution with the same name and input while open gave {seen}",
        )
        if "after_close" in seen or "after_close_error" in seen:
            self.checks.check(
                "same_name_is_same_execution",
                seen.get("after_close_error") == "ExecutionAlreadyExists",
                f"StartExecution with the same name after the close gave {seen}",
            )
