"""The outcome invariants of a case's executions (docs/invariants.md lists them all): each ends
in a class of the closed list, agreeing with the case record, the ledger, the effects, the
stock and the escalation queue; every class other than COMPLETED is honest only where the
case's plan holds a fault that makes it so (fault_campaign.honesty); at most one execution
runs forward; a clean case completes, a valid one is never rejected, one generated invalid
always is. ESCALATED cases are
judged in fault_campaign/escalated.py, what follows a person's decision in
fault_campaign/operator_checks.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fault_campaign.checks import Checks, fields_of
from fault_campaign.escalated import EscalationChecks
from fault_campaign.honesty import enabling
from fault_campaign.observe import Snapshot, foreign_request
from fault_campaign.overlap import only_overlaps
from fault_campaign.paths import (
    OUTCOME_CLASSES,
    classify,
    escalated_in,
    failed_operation,
    ran_forward,
    stopped_at_completion,
    stopped_at_outcome_record,
    stopped_at_validation,
    tasks_beyond_validation,
)
from fault_campaign.plan_evidence import Evidence
from fault_campaign.runner import CaseRun
from stacks.lambda_errors import LAMBDA_CRASH_ERRORS, LAMBDA_INVOKE_ERRORS

# Errors the workflow retries (docs/design.md §4): an execution that stops with one of them
# stopped after its retries ran out.
RETRIED_ERRORS = frozenset({"TransientError", "ActionPending", *LAMBDA_INVOKE_ERRORS})
# The compensation also retries what may have dispatched (§5, item 3); BudgetExhausted is not
# retried (nothing more can be sent), so it stops at its first delivery.
COMPENSATION_RETRIED_ERRORS = RETRIED_ERRORS | {
    "OutcomeUnknown",
    "States.Timeout",
    *LAMBDA_CRASH_ERRORS,
}
NOT_RETRIED = frozenset({"BudgetExhausted"})
FORWARD = ("reserve", "refund", "ship")


class OutcomeChecker:
    def __init__(
        self, run: CaseRun, budget: int, checks: Checks, last_seen: Mapping[str, Any]
    ) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        # Each operation's ledger record as last seen (kept by the effect checks), and the
        # closed ones that expired since (operation -> the record last seen).
        self.last_seen = last_seen
        self.expired_ops: dict[str, Mapping[str, Any]] = {}
        self.foreign_digests = {
            foreign_request(run.plan.case, str(n["operation"])).digest
            for n in run.plan.nemeses
            if n["kind"] == "foreign_record"
        }
        self.escalations = EscalationChecks(self)

    # -- helpers the checks share ----------------------------------------------------------
    def allowed(
        self,
        name: str,
        key: str,
        snap: Snapshot | None,
        step: str | None,
        detail: str,
        *,
        limit: Mapping[str, Any] | None = None,
    ) -> bool:
        """Check that the plan holds a fault that makes alternative `key` honest (`limit`: a
        REFUND_LIMIT_REACHED escalation's numbers)."""
        evidence = Evidence(
            plan=self.run.plan,
            step=step,
            stock_before=self.run.stock_before,
            ledger=snap.ledger if snap is not None else None,
            budget=self.budget,
            limit=limit,
            counters_before=self.run.counters_before,
        )
        faults = enabling(key, evidence)
        return self.checks.check(
            name, bool(faults), f"{detail}: no planned fault makes `{key}` honest"
        )

    def expired(self, snap: Snapshot, operation: str, *, was: str | None = None) -> bool:
        """The operation's record was closed and expired (its retention passed, §3.7), and is
        gone or, since, written SETTLED by a person's decision (a resolution settles an action
        it finds no record of). With `was`, only if it was last seen with that status: an
        expired FAILED record stands for no effect."""
        record = snap.ledger.get(operation)
        last = self.expired_ops.get(operation)
        return (
            last is not None
            and (record is None or record.get("status") == "SETTLED")
            and (was is None or last.get("status") == was)
        )

    def own(self, snap: Snapshot, operation: str) -> Mapping[str, Any] | None:
        """The operation's record if it is the case's own (not a planted foreign request's)."""
        record = snap.ledger.get(operation)
        if record is None or record.get("request_digest") in self.foreign_digests:
            return None
        return record

    def messages(self, arn: str, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.run.messages if m.get("kind") == kind and m.get("execution") == arn]

    # -- executions ------------------------------------------------------------------------
    def executions(self, snap: Snapshot, *, final: bool) -> None:
        check = self.checks.check
        forward = [e for e in snap.executions.values() if ran_forward(e)]
        check(
            "one_execution_runs_forward",
            len(forward) <= 1,
            f"{snap.label}: {[e['name'] for e in forward]} ran forward",
        )
        for arn, execution in snap.executions.items():
            kind = classify(execution)
            name = execution["name"]
            if execution["status"] == "RUNNING":
                check("terminal_state", False, f"{snap.label}: {name} still RUNNING")
                continue
            check("terminal_state", kind in OUTCOME_CLASSES, f"{snap.label}: {name} ended {kind}")
            if kind == "DUPLICATE":
                self._duplicate(snap, arn, execution)
            elif kind == "REJECTED":
                self._rejected(snap, execution)
            elif kind == "COMPLETED":
                self._completed(snap, arn, execution)
            elif kind == "ESCALATED":
                self._steps_agree(snap, execution)
                self.escalations.escalated(snap, arn, execution)
            elif kind in ("FAILED_RESUMABLE", "COMPENSATION_PENDING"):
                self._failed(snap, arn, execution, kind, final=final)
            elif kind == "REFUSED":
                check(
                    "refused_only_after_resolution",
                    bool((snap.case_record or {}).get("resolution")),
                    f"{snap.label}: {name} FAILED with ActionSettled, case record "
                    f"{fields_of(snap.case_record, 'outcome', 'resolution')}",
                )

    def _owner(self, snap: Snapshot) -> Any:
        return (snap.case_record or {}).get("execution_arn")

    def _duplicate(self, snap: Snapshot, arn: str, execution: Mapping[str, Any]) -> None:
        output = execution["output"] or {}
        owner = self._owner(snap)
        self.checks.check(
            "duplicate_has_no_effect",
            not tasks_beyond_validation(execution)
            and output.get("original_execution_arn") == owner
            and arn != owner
            and not self.messages(arn, "CASE_ESCALATED"),
            f"{snap.label}: {execution['name']} delivered to "
            f"{tasks_beyond_validation(execution)}, points at "
            f"{output.get('original_execution_arn')}, owner {owner}",
        )

    def _steps_agree(self, snap: Snapshot, execution: Mapping[str, Any]) -> None:
        """Each step the output reports is the ledger's COMPLETED record, same reference."""
        steps = (execution.get("output") or {}).get("steps") or {}
        for step, result in steps.items():
            record = snap.ledger.get(step)
            if self.expired(snap, step, was="COMPLETED"):
                continue  # completed, and its retention passed since (§3.7)
            self.checks.check(
                "outputs_agree_with_ledger",
                record is not None
                and record.get("status") == "COMPLETED"
                and record.get("action_key") == result.get("action_key")
                and record.get("downstream_ref") == result.get("downstream_ref"),
                f"{snap.label}: output step {step} {result.get('downstream_ref')} vs ledger "
                f"{fields_of(record, 'status', 'downstream_ref')}",
            )

    def _completed(self, snap: Snapshot, arn: str, execution: Mapping[str, Any]) -> None:
        check = self.checks.check
        record = snap.case_record or {}
        output = execution.get("output") or {}
        reservation = snap.reservations[0] if snap.reservations else {}
        self._steps_agree(snap, execution)
        check(
            "case_record_agrees",
            record.get("outcome") == "COMPLETED" and record.get("execution_arn") == arn,
            f"{snap.label}: {execution['name']} COMPLETED, case record "
            f"{fields_of(record, 'outcome', 'execution_arn')}",
        )
        check(
            "completed_means_done",
            len(snap.refunds) == 1
            and len(snap.shipments) == 1
            and reservation.get("status") == "HELD"
            and set(output.get("steps") or {}) == set(FORWARD)
            and not output.get("compensations")
            and not output.get("escalation")
            and all(
                (snap.ledger.get(op) or {}).get("status") == "COMPLETED"
                or self.expired(snap, op, was="COMPLETED")
                for op in FORWARD
            )
            and self.own(snap, "release") is None,
            f"{snap.label}: COMPLETED with {len(snap.refunds)} refunds, {len(snap.shipments)} "
            f"shipments, reservation {reservation.get('status')}, output steps "
            f"{sorted(output.get('steps') or {})}, ledger "
            f"{ {op: r.get('status') for op, r in snap.ledger.items()} }",
        )
        check(
            "queue_agrees",
            not self.messages(arn, "CASE_ESCALATED"),
            f"{snap.label}: COMPLETED but an escalation message was sent",
        )

    def _rejected(self, snap: Snapshot, execution: Mapping[str, Any]) -> None:
        check = self.checks.check
        error = execution.get("error")
        check(
            "rejected_at_validation",
            stopped_at_validation(execution) and not tasks_beyond_validation(execution),
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

    # -- stopped executions ----------------------------------------------------------------
    def _failed(
        self, snap: Snapshot, arn: str, execution: Mapping[str, Any], kind: str, *, final: bool
    ) -> None:
        check = self.checks.check
        error = execution.get("error")
        state = execution.get("last_state")
        operation = failed_operation(execution)
        label = f"{snap.label}: {execution['name']} FAILED at {state} with {error}"
        pending = kind == "COMPENSATION_PENDING"
        retried = COMPENSATION_RETRIED_ERRORS if pending else RETRIED_ERRORS
        check(
            "failed_after_transient_retries",
            (error in retried and int(execution.get("last_run_deliveries", 0)) >= 2)
            or (pending and error in NOT_RETRIED),
            f"{label} after {execution.get('last_run_deliveries')} deliveries in its last run: "
            f"{str(execution.get('cause'))[:300]}",
        )
        if pending:
            self.allowed("failed_honestly", "compensation-pending", snap, "release", label)
        elif operation in FORWARD:
            self.allowed("failed_honestly", "failed-resumable", snap, operation, label)
            self._nothing_after_failed(snap, str(operation), label)
        else:
            self.allowed("failed_honestly", "failed-resumable-outcome", snap, None, label)
        self._failed_record(snap, execution, pending, label)
        check(
            "queue_agrees",
            bool(self.messages(arn, "EXECUTION_NOT_SUCCEEDED")),
            f"{label}, and no message on the escalation queue",
        )
        if final:
            ledger = snap.ledger.get(operation or "") or {}
            spent = int(ledger.get("attempts", 0)) >= self.budget
            if operation in FORWARD:
                # The last redrive's delivery, nothing failing any more, meets the spent budget:
                # BudgetExhausted, caught to ReconcileStep, which escalates (§3.2, §4).
                self.checks.check(
                    "budget_spent_escalates",
                    not spent,
                    f"{label}: still FAILED after the cause was removed and a redrive, with "
                    f"{operation}'s budget spent ({ledger.get('attempts')}/{self.budget}): its "
                    "BudgetExhausted must have escalated",
                )
            if not (spent or error == "BudgetExhausted"):
                self.allowed(
                    "redrive_finishes",
                    "still-failed-after-final-redrive",
                    snap,
                    operation,
                    f"{label}: still FAILED after the cause was removed and a redrive; "
                    f"{operation} attempts {ledger.get('attempts')}/{self.budget}",
                )

    def _failed_record(
        self, snap: Snapshot, execution: Mapping[str, Any], pending: bool, label: str
    ) -> None:
        """What the case record must say of a stopped execution (§5, items 3 and 6)."""
        record = snap.case_record
        outcome = None if record is None else record.get("outcome")
        allowed: tuple[str, ...] = ("COMPENSATION_PENDING",) if pending else ("IN_PROGRESS",)
        if stopped_at_outcome_record(execution):
            # The record may already be written: an invoke that failed after the function ran
            # (at Escalate: the record is written before the message is queued).
            allowed += ("ESCALATED" if escalated_in(execution) else "COMPLETED",)
        if stopped_at_completion(execution):
            # The shipment's transaction writes COMPLETED (docs/design.md §3.11): an invoke that
            # failed after the function ran leaves it written.
            allowed += ("COMPLETED",)
        if record is None and stopped_at_validation(execution):
            return  # failed before the record was written (throttled before it ran)
        if pending and outcome == "IN_PROGRESS":
            # Honest only where the release never reached the ledger (it marks first).
            self.checks.check(
                "case_record_agrees",
                "release" not in snap.ledger,
                f"{label}: case record IN_PROGRESS but a release record exists",
            )
            self.allowed(
                "case_record_agrees", "compensation-pending-unmarked", snap, "release", label
            )
            return
        self.checks.check(
            "case_record_agrees",
            outcome in allowed,
            f"{label}: case record {outcome}, expected one of {allowed}",
        )

    def _nothing_after_failed(self, snap: Snapshot, operation: str, label: str) -> None:
        later = FORWARD[FORWARD.index(operation) + 1 :]
        effects = {"refund": snap.refunds, "ship": snap.shipments}
        self.checks.check(
            "nothing_after_failed_step",
            not any(effects.get(op) for op in later)
            and not any(
                (self.own(snap, op) or {}).get("status") not in (None, "SETTLED") for op in later
            ),
            f"{label}: later steps {later} acted",
        )

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
            and only_overlaps(plan.nemeses, self.run.fired)  # deliveries at once change nothing
            and not any(n["kind"] == "foreign_record" for n in plan.nemeses)
            and self.run.stock_before is not None
            and self.run.stock_before >= quantity
        )
        if clean:
            first = self.run.snapshots[0].executions.get(self.run.owner_arn or "") or owner
            escalation = (first.get("output") or {}).get("escalation") or {}
            if escalation.get("reason") == "REFUND_LIMIT_REACHED":
                # No fault, and the day's ceiling had no room for it: the log of claims says so.
                self.allowed(
                    "clean_case_completes",
                    "REFUND_LIMIT_REACHED",
                    None,
                    "refund",
                    f"a case without faults escalated REFUND_LIMIT_REACHED "
                    f"{escalation.get('limit')}",
                    limit=escalation.get("limit"),
                )
                return
            self.checks.check(
                "clean_case_completes",
                classify(first) == "COMPLETED",
                f"a case without faults and with stock ended {classify(first)}",
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
