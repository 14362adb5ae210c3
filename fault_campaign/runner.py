"""One case through the real state machine: its executions, duplicates, redrives, snapshots.

The order of events for a plan:
1. the case starts under its case id, with its nemeses armed; a concurrent duplicate starts
   right after it under another name, a `same_name` start repeats the first StartExecution;
2. when everything has closed, a snapshot (before any clock jump);
3. while the owning execution is FAILED (and not a rejection): per planned round, the clock
   jumps (at most 14 days after the close), the cause is removed if the round says so, the
   execution is redriven, a snapshot. If it is still FAILED after the rounds, one last round
   removes the cause, disarms the nemeses and redrives;
4. a later duplicate (or a resubmission with other parameters) starts after its jump;
5. a final snapshot. The escalation queue is drained after every close.

A planned `foreign_record` nemesis writes its ledger record before step 1 (the step's key used
before with other parameters); a planned `legacy_retention` gives the step's record, if it is
open at the first close, the retention the release before the open-record rule (§3.7) wrote.
The operator (fault_campaign.operator) acts at the first close (before 3; a case it resolves
is not redriven by the runner) or after 4, each of its steps followed by a snapshot.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from fault_campaign import overlap
from fault_campaign.approval import approve
from fault_campaign.nemeses import armed
from fault_campaign.observe import Observer, Snapshot
from fault_campaign.plan import MAX_REDRIVE_JUMP_SECONDS, CasePlan
from saga.ceilings import counter_key

REJECTIONS = frozenset(
    {"InvalidRequest", "AuthorizationDenied", "ApprovalMismatch", "ApprovalInvalid", "KeyConflict"}
)


@dataclass
class CaseRun:
    plan: CasePlan
    stock_before: int | None
    stock_after: int | None
    snapshots: list[Snapshot] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    operator: list[dict[str, Any]] = field(default_factory=list)  # what the operator did
    same_name: dict[str, Any] | None = None
    owner_arn: str | None = None
    redrives: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)  # what happened at run time (for the report)
    overlaps: dict[str, int] = field(default_factory=dict)  # per step (fault_campaign.overlap)
    # The daily refund counters before the case as the campaign's own log of claims says they
    # stood (counter key -> minor units): the account's earlier cases' charges not given back
    # (docs/design.md §3.12; `refund_claims`).
    counters_before: dict[str, int] = field(default_factory=dict)

    @property
    def final(self) -> Snapshot:
        return self.snapshots[-1]


def claim_charge(case: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[str, int] | None:
    """What a refund's ledger record holds charged on its day's counter and not given back:
    (counter key, minor units), or None. A claim charged records `charged_day` and
    `charged_minor`; only the provider's refusal, recorded FAILED RefundRejected by the
    delivery that held the record (no person's decision on it), gave the amount back."""
    day, minor = record.get("charged_day"), int(record.get("charged_minor") or 0)
    if not day or not minor:
        return None
    refused = (record.get("error") or {}).get("type") == "RefundRejected"
    if record.get("status") == "FAILED" and refused and not record.get("resolution"):
        return None
    refund = case["refund"]
    return counter_key(str(case["tenant_id"]), str(refund["currency"]), str(day)), minor


def refund_claims(case: Mapping[str, Any], snapshots: list[Snapshot]) -> dict[str, int]:
    """The case's refund claims as its snapshots saw them, per counter key: each charged day's
    record as last seen (the ledger's TTL may delete a closed record later, and a record that
    expired may be claimed again on another day)."""
    by_day: dict[str, Mapping[str, Any]] = {}
    for snap in snapshots:
        record = snap.ledger.get("refund")
        if record is not None and record.get("charged_day"):
            by_day[str(record["charged_day"])] = record
    totals: dict[str, int] = {}
    for kept in by_day.values():
        charged = claim_charge(case, kept)
        if charged is not None:
            totals[charged[0]] = totals.get(charged[0], 0) + charged[1]
    return totals


def changed_case(case: dict[str, Any]) -> dict[str, Any]:
    """The same case id, approved again with other parameters (a different request)."""
    raw = {k: copy.deepcopy(v) for k, v in case.items() if k not in ("sandbox",)}
    raw["refund"]["amount_minor"] = raw["refund"]["amount_minor"] % 100_000_000 + 1
    return approve(raw)


def _is_rejection(execution: dict[str, Any]) -> bool:
    return execution["status"] == "FAILED" and execution.get("error") in REJECTIONS


class CaseRunner:
    def __init__(self, observer: Observer, *, timeout_seconds: float = 300.0) -> None:
        self.observer = observer
        self.local = observer.local
        self.timeout = timeout_seconds
        # The campaign's own log of claims in this account: per counter key, the refunds its
        # cases' records charged and did not give back (cases run one at a time).
        self.claims: dict[str, int] = {}

    @functools.cached_property
    def operator_target(self) -> Any:
        """sagactl's target for the operator's steps, built once per account: a new session's
        four clients cost about 0.3 s of CPU (each loads its service model again)."""
        from fault_campaign.operator import operator_target

        return operator_target(self.observer)

    def wait_all(self, arns: list[str]) -> None:
        while True:
            for arn in arns:
                description = self.observer.wait(arn, timeout_seconds=self.timeout)
                if description["status"] == "RUNNING":
                    raise TimeoutError(f"{arn} still RUNNING after {self.timeout}s")
            if not overlap.settle():  # an execution the overlap nemesis stopped runs again
                return

    def close(self, run: CaseRun, label: str, arns: list[str]) -> None:
        """Drain the escalation queue and take a snapshot."""
        run.messages.extend(self.observer.drain_queue())
        sku = str((run.plan.case.get("reserve") or {}).get("sku", ""))
        run.snapshots.append(self.observer.snapshot(label, run.plan.case_id, arns, sku))

    def _owner(self, run: CaseRun, first: str) -> str:
        record = run.snapshots[-1].case_record if run.snapshots else None
        owner = (record or {}).get("execution_arn")
        return owner if isinstance(owner, str) else first

    def run(self, plan: CasePlan) -> CaseRun:
        started = time.perf_counter()
        case = plan.case
        sku = str((case.get("reserve") or {}).get("sku", ""))
        run = CaseRun(
            plan=plan,
            stock_before=self.observer.stock(sku),
            stock_after=None,
            counters_before=dict(self.claims),
        )
        arns: list[str] = []
        duplicate = plan.duplicate or {}
        for nemesis in plan.nemeses:
            if nemesis["kind"] == "foreign_record":
                self.observer.put_foreign_record(case, str(nemesis["operation"]))
        operator = plan.operator or {}
        person = functools.partial(self._decide_in_flight, run)
        with armed(plan.nemeses, self.observer.outputs, plan.case_id, person) as state:
            first = self.observer.start(case, plan.case_id)["executionArn"]
            arns.append(first)
            if duplicate.get("when") == "concurrent":
                arns.append(self.observer.start(case, f"{plan.case_id}-dup")["executionArn"])
            if duplicate.get("when") == "same_name":
                run.same_name = self._same_name_while_open(plan)
            self.wait_all(arns)
            self.close(run, "closed", arns)
            run.owner_arn = self._owner(run, first)
            self._legacy_retentions(plan, state.fired)
            if operator.get("at") == "closed":
                self._operate(run, arns, state.nemeses)
            if not self._resolved(run):
                self._redrives(run, arns, state.nemeses)
            if duplicate.get("when") in ("later", "changed"):
                self._resubmit(run, arns, duplicate)
            if duplicate.get("when") == "same_name":
                self._same_name_after_close(run)
            if operator.get("at") == "end":
                self._operate(run, arns, state.nemeses)
            run.fired = list(state.fired)
            run.overlaps = state.meter.overlaps() if state.meter is not None else {}
        run.stock_after = self.observer.stock(sku)
        run.seconds = time.perf_counter() - started
        self._log_claims(run)
        return run

    def _log_claims(self, run: CaseRun) -> None:
        """The case's refund claims into the account's log (the next case's counters before)."""
        for key, minor in refund_claims(run.plan.case, run.snapshots).items():
            self.claims[key] = self.claims.get(key, 0) + minor

    def _legacy_retentions(self, plan: CasePlan, fired: list[str]) -> None:
        """Each planned `legacy_retention`: the record, if open, as the release before the
        open-record rule (§3.7) left it."""
        for nemesis in plan.nemeses:
            if nemesis["kind"] != "legacy_retention":
                continue
            operation = str(nemesis["operation"])
            if self.observer.give_legacy_retention(plan.case_id, operation):
                fired.append(f"legacy-retention:{operation}")

    def _operate(self, run: CaseRun, arns: list[str], nemeses: list[dict[str, Any]]) -> None:
        from fault_campaign.operator import Operator

        nemeses.clear()  # the person acts after the faults are over
        # An overlap that has not fired fires on none of the person's deliveries; one that holds
        # a delivery keeps it held while the person works, where the plan says so (`release`).
        overlap.disarm(keep_held="release" in (run.plan.operator or {}).get("steps", ()))
        Operator(self, int(self.observer.outputs["AttemptBudget"])).act(run, arns)

    def _decide_in_flight(self, run: CaseRun, event: dict[str, Any]) -> None:
        """A person resolves the case while a delivery holds one of its actions (the overlap
        nemesis stopped its execution): what the operator's tool answered, with the steps."""
        from fault_campaign.operator import Operator

        if "skipped" not in event:
            budget = int(self.observer.outputs["AttemptBudget"])
            event.update(Operator(self, budget).resolve(run.plan.case_id))
            event["clock_after"] = self.local.clock.now()  # the settling clock read in between
        run.operator.append(event)

    @staticmethod
    def _resolved(run: CaseRun) -> bool:
        return bool((run.snapshots[-1].case_record or {}).get("resolution"))

    def _redrives(self, run: CaseRun, arns: list[str], nemeses: list[dict[str, Any]]) -> None:
        """While the owner is FAILED (not rejected): the planned rounds, then a final one."""
        owner = run.owner_arn or arns[0]
        rounds = [*run.plan.redrives, {"jump": 0, "heal": True, "final": True}]
        for number, redrive in enumerate(rounds, start=1):
            execution = self.observer.describe(owner)
            if execution["status"] != "FAILED" or _is_rejection(execution):
                return
            jump = min(float(redrive.get("jump", 0)), MAX_REDRIVE_JUMP_SECONDS)
            if jump:
                self.local.clock.advance(jump)
                run.labels.add("jump:before-redrive")
            if redrive.get("heal"):
                self.observer.heal(run.plan.case_id, run.plan.faults)
            if redrive.get("final"):
                nemeses.clear()  # the cause removed: DynamoDB and Lambda behave again
                overlap.disarm()
                run.notes.append("final heal and redrive")
            try:
                self.observer.redrive(owner)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExecutionNotRedrivable":
                    raise
                # Past the 14 days (the operator let time pass): the case waits for a person.
                run.notes.append(f"not redrivable: {exc}")
                return
            run.redrives = number
            run.labels.add("redrive" if number == 1 else "redrive:several")
            self.wait_all([owner])
            self.close(run, f"redrive {number}", arns)

    def _resubmit(self, run: CaseRun, arns: list[str], duplicate: dict[str, Any]) -> None:
        """The same case later (after a jump), or the same case id with other parameters."""
        if duplicate.get("jump"):
            self.local.clock.advance(float(duplicate["jump"]))
        case = run.plan.case
        resubmitted = case if duplicate["when"] == "later" else changed_case(case)
        arns.append(self.observer.start(resubmitted, f"{run.plan.case_id}-again")["executionArn"])
        self.wait_all(arns[-1:])
        self.close(run, f"resubmitted {duplicate['when']}", arns)

    def _same_name_while_open(self, plan: CasePlan) -> dict[str, Any]:
        """The same StartExecution again at once; a case rejected at ValidateCase may have
        closed by then (a loaded machine), and Step Functions then answers as after a close."""
        try:
            again = self.observer.start(plan.case, plan.case_id)["executionArn"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code != "ExecutionAlreadyExists":
                raise
            return {"after_close_error": code}
        return {"while_open": again}

    def _same_name_after_close(self, run: CaseRun) -> None:
        try:
            again = self.observer.start(run.plan.case, run.plan.case_id)["executionArn"]
            run.same_name = {**(run.same_name or {}), "after_close": again}
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            run.same_name = {**(run.same_name or {}), "after_close_error": code}
