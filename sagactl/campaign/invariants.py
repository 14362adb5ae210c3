"""The invariants, checked after every case (on every snapshot) and over every account.

Per case (issue 14, docs/design.md §3-§5, §8):
- at most one refund, one shipment, one reservation;
- no effect unrecorded: an effect's ledger record exists (unless its retention passed since it
  was last seen) and says COMPLETED or UNKNOWN, or IN_PROGRESS held by an owner or marked with
  `first_dispatch_at`; never FAILED, never "nothing happened" (IN_PROGRESS with no owner and no
  `first_dispatch_at`);
- a COMPLETED record has its effect, with the recorded downstream reference; a reservation
  exists iff the reserve record is COMPLETED; a RELEASED reservation was released by this
  case's release action; stock that shipped is never released;
- effects carry exactly the approved parameters (amount, currency, address text, SKU, quantity);
- attempts and re-attempt rounds never exceed the stack's AttemptBudget;
- every execution ends in a state of the closed list: COMPLETED, ESCALATED, DUPLICATE, REJECTED
  (FAILED at ValidateCase, nothing done), FAILED_RESUMABLE (FAILED at a forward step after its
  transient retries, case IN_PROGRESS) or COMPENSATION_PENDING (FAILED at the release); the
  last two only before a redrive, or, after the cause was removed and a redrive, with the
  step's budget spent (a person decides). Each agrees with the case record, the ledger, the
  effects and the escalation queue;
- at most one execution of a case runs forward; a duplicate points at the owner;
- a clean case (no fault, enough stock) completes; a case generated invalid is rejected with
  its error, a valid one never is.
Per account: stock conserved (initial - held reservations = available, never negative), every
effect belongs to a case of the account, at most one per case.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sagactl.campaign.observe import Snapshot
from sagactl.campaign.runner import REJECTIONS, CaseRun

FORWARD_STATES = frozenset(
    {"ValidateCase", "ReserveStock", "IssueRefund", "CreateShipment", "RecordOutcome"}
)
RETRIED_OUT_ERRORS = frozenset(
    {
        "TransientError",
        "ActionPending",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
        "Lambda.ClientExecutionTimeoutException",
    }
)
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
# operation -> (the Snapshot's list of its effects, the id field its downstream_ref names)
_EFFECT_IDS = {"refund": ("refunds", "refund_id"), "ship": ("shipments", "shipment_id")}


@dataclass
class Checks:
    """Checks run and the violations found, each with the invariant's name and what was seen."""

    run: int = 0
    violations: list[dict[str, str]] = field(default_factory=list)
    by_invariant: Counter[str] = field(default_factory=Counter)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.run += 1
        self.by_invariant[name] += 1
        if not ok:
            self.violations.append({"invariant": name, "detail": detail})
        return ok


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
    if status == "FAILED" and execution.get("last_state") in FORWARD_STATES:
        return "FAILED_RESUMABLE"
    return f"{status}@{execution.get('last_state')}"


def _fields(record: Mapping[str, Any] | None, *names: str) -> Any:
    return None if record is None else tuple(record.get(name) for name in names)


class CaseChecker:
    def __init__(self, run: CaseRun, budget: int, checks: Checks) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        self.case = run.plan.case
        self.case_id = run.plan.case_id
        self.last_seen: dict[str, dict[str, Any]] = {}

    # -- effects and records ---------------------------------------------------------------
    def _record_for_effect(self, snap: Snapshot, operation: str, what: str) -> None:
        record = snap.ledger.get(operation)
        if record is None:
            seen = self.last_seen.get(operation)
            expired = seen is not None and float(seen.get("expires_at", 0)) <= snap.clock
            self.checks.check(
                "effect_recorded",
                expired,
                f"{snap.label}: a {what} exists but no {operation} ledger record"
                + ("" if seen is None else f" (last seen expiring at {seen.get('expires_at')})"),
            )
            return
        status = record.get("status")
        nothing_happened = (
            status == "IN_PROGRESS"
            and not record.get("owner")
            and "first_dispatch_at" not in record
        )
        self.checks.check(
            "effect_recorded",
            status in ("COMPLETED", "UNKNOWN", "IN_PROGRESS") and not nothing_happened,
            f"{snap.label}: a {what} exists but the {operation} record is {status}"
            + (" with no owner and no first_dispatch_at" if nothing_happened else ""),
        )

    def snapshot(self, snap: Snapshot) -> None:
        check = self.checks.check
        label = snap.label
        check("one_refund", len(snap.refunds) <= 1, f"{label}: {len(snap.refunds)} refunds")
        check("one_shipment", len(snap.shipments) <= 1, f"{label}: {len(snap.shipments)} shipments")
        check(
            "one_reservation",
            len(snap.reservations) <= 1,
            f"{label}: {len(snap.reservations)} reservations",
        )
        reservation = snap.reservations[0] if snap.reservations else None
        if snap.refunds:
            self._record_for_effect(snap, "refund", "refund")
        if snap.shipments:
            self._record_for_effect(snap, "ship", "shipment")
        if reservation is not None:
            record = snap.ledger.get("reserve")
            seen = self.last_seen.get("reserve")
            expired = (
                record is None
                and seen is not None
                and float(seen.get("expires_at", 0)) <= snap.clock
            )
            check(
                "reservation_iff_reserved",
                expired or (record is not None and record.get("status") == "COMPLETED"),
                f"{label}: reservation {reservation.get('status')} but reserve record "
                f"{None if record is None else record.get('status')}",
            )
            if reservation.get("status") == "RELEASED":
                self._record_for_effect(snap, "release", "released reservation")
                check(
                    "released_by_own_release",
                    str(reservation.get("released_by", "")).endswith(
                        f"#release#{self.case_id}.reserve"
                    ),
                    f"{label}: released by {reservation.get('released_by')}",
                )
        check(
            "shipped_stock_not_released",
            not (snap.shipments and reservation and reservation.get("status") == "RELEASED"),
            f"{label}: a shipment exists and the reservation was released",
        )
        for operation, record in snap.ledger.items():
            self.last_seen[operation] = record
            check(
                "attempts_within_budget",
                int(record.get("attempts", 0)) <= self.budget
                and int(record.get("reconcile_rounds", 0)) <= self.budget,
                f"{label}: {operation} attempts {record.get('attempts')}, rounds "
                f"{record.get('reconcile_rounds', 0)}, budget {self.budget}",
            )
            status = record.get("status")
            if status != "COMPLETED":
                if operation == "reserve":
                    check(
                        "reservation_iff_reserved",
                        reservation is None,
                        f"{label}: reserve {status} but a reservation exists",
                    )
                continue
            ref = record.get("downstream_ref")
            if operation in _EFFECT_IDS:
                effects, id_field = _EFFECT_IDS[operation]
                ids = [effect.get(id_field) for effect in getattr(snap, effects)]
                check(
                    "completed_has_effect",
                    ids == [ref],
                    f"{label}: {operation} COMPLETED ref {ref}, {effects} {ids}",
                )
            elif operation == "reserve":
                check(
                    "completed_has_effect",
                    reservation is not None,
                    f"{label}: reserve COMPLETED and no reservation",
                )
            elif operation == "release":
                check(
                    "completed_has_effect",
                    reservation is not None
                    and reservation.get("status") == "RELEASED"
                    and reservation.get("released_by") == record.get("action_key"),
                    f"{label}: release COMPLETED, reservation {reservation}",
                )
        self._parameters(snap)

    def _parameters(self, snap: Snapshot) -> None:
        case = self._owner_input(snap)
        for refund in snap.refunds:
            expected = case["refund"]
            self.checks.check(
                "effect_parameters",
                (
                    refund.get("amount_minor"),
                    refund.get("currency"),
                    refund.get("payment_reference"),
                )
                == (expected["amount_minor"], expected["currency"], expected["payment_reference"]),
                f"{snap.label}: refund {refund} for {expected}",
            )
        for shipment in snap.shipments:
            self.checks.check(
                "effect_parameters",
                shipment.get("address") == case["shipment"]["address"]
                and shipment.get("sku") == case["reserve"]["sku"]
                and shipment.get("quantity") == case["reserve"]["quantity"],
                f"{snap.label}: shipment {shipment} for {case['shipment']} {case['reserve']}",
            )
        for reservation in snap.reservations:
            self.checks.check(
                "effect_parameters",
                (reservation.get("sku"), reservation.get("quantity"))
                == (case["reserve"]["sku"], case["reserve"]["quantity"]),
                f"{snap.label}: reservation {reservation} for {case['reserve']}",
            )

    def _owner_input(self, snap: Snapshot) -> Mapping[str, Any]:
        # Every generated input of a case has the same parameters but a changed resubmission's,
        # which is never the owner (the case record binds the first).
        return self.case

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
                    execution["path"] == ["ValidateCase", "NewOrDuplicate", "DuplicateCase"]
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
                    f"{_fields(record, 'outcome', 'execution_arn')}",
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
                f"{_fields(record, 'status', 'downstream_ref')}",
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
            execution["path"] == ["ValidateCase", "RejectCase"],
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
                in ("OutcomeUnknown", "BudgetExhausted", "States.Timeout", "Lambda.Unknown")
            ),
            f"{snap.label}: {execution['name']} FAILED at {state} with {error}: "
            f"{str(execution.get('cause'))[:400]}",
        )
        outcomes = (
            ("COMPENSATION_PENDING", "IN_PROGRESS")
            if kind == "COMPENSATION_PENDING"
            else ("IN_PROGRESS",)
        )
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

    def all(self) -> None:
        for index, snap in enumerate(self.run.snapshots):
            self.snapshot(snap)
            self.executions(
                snap,
                final=index == len(self.run.snapshots) - 1
                and self.run.redrives > len(self.run.plan.redrives),
            )
        if self.run.same_name is not None:
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
        self.oracle()


def check_case(run: CaseRun, budget: int) -> Checks:
    checks = Checks()
    CaseChecker(run, budget, checks).all()
    return checks


def check_account(  # noqa: PLR0917 (what one account holds, read once)
    runs: Iterable[CaseRun],
    initial_stock: Mapping[str, int],
    available: Mapping[str, int | None],
    reservations: list[dict[str, Any]],
    refunds: list[dict[str, Any]],
    shipments: list[dict[str, Any]],
) -> Checks:
    """Over one account (a block of cases): stock conserved, effects belong to its cases."""
    checks = Checks()
    case_ids = {run.plan.case_id for run in runs}
    held: Counter[str] = Counter()
    for reservation in reservations:
        if reservation.get("status") == "HELD":
            held[str(reservation.get("sku"))] += int(reservation.get("quantity", 0))
    for sku, initial in initial_stock.items():
        now = available.get(sku)
        checks.check(
            "stock_conserved",
            now is not None and now >= 0 and initial - held[sku] == now,
            f"{sku}: initial {initial} - held {held[sku]} != available {now}",
        )
    for name, items in (
        ("reservations", reservations),
        ("refunds", refunds),
        ("shipments", shipments),
    ):
        per_case = Counter(str(item.get("case_id")) for item in items)
        for case_id, count in per_case.items():
            checks.check(
                "effects_belong_to_cases",
                case_id in case_ids and count <= 1,
                f"{name}: {count} for case {case_id}"
                + ("" if case_id in case_ids else " (not a case of this account)"),
            )
    return checks
