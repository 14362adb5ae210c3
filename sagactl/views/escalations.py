"""The escalation worklist's rules: which cases are open, what each needs, what a person sees.

The cases table is the worklist (docs/design.md §5), not the escalation queue. A case is open while
it
has no `resolution` and either
- its outcome is ESCALATED: the automation finished and handed the decision to a person; or
- its outcome is IN_PROGRESS or COMPENSATION_PENDING and the execution that owns it is FAILED,
  TIMED_OUT or ABORTED: the automation stopped with its work unfinished (while the execution
  runs, the case is still the automation's).
A case rejected at ValidateCase has no case record: nothing was done, there is nothing to settle.
The failed-execution rule still queues a message for each of its stops, as for every execution
that ends FAILED, TIMED_OUT or ABORTED with an error other than ActionSettled; `escalations`
says how many queued messages belong to no open case, and why (QueueNote).

Pure: sagactl.operations.escalations reads the case record, the execution and the redrive plan
these rules judge, and records a resolution.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from saga.cases import CaseOutcome
from saga.errors import ActionSettled
from saga.formats import major_units
from saga.ledger import OPEN_STATUSES, LedgerStatus
from sagactl.errors import UsageError
from sagactl.views.case import ActionView, rejection_text
from sagactl.views.plain import execution_input
from sagactl.views.redrive import REDRIVABLE_STATUSES
from sagactl.views.timeline import VALIDATION_REJECTIONS, FailedStep, error_message

CANDIDATE_OUTCOMES = (
    CaseOutcome.ESCALATED,
    CaseOutcome.COMPENSATION_PENDING,
    CaseOutcome.IN_PROGRESS,
)
FORWARD_STEPS = ("reserve", "refund", "ship")
MAX_DECISION_CHARS = 2000
MAX_BY_CHARS = 256
_STOP_EVENTS = frozenset({"ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"})


# --- the worklist --------------------------------------------------------------------------------
@dataclass
class Escalation:
    """One open case of the worklist and the decision it needs."""

    case_id: str
    tenant_id: str | None
    outcome: str
    since: str  # when it became open (ISO 8601, UTC): the escalation, or the execution's stop
    reason: str
    step: str | None
    detail: str | None
    decision_needed: str
    execution_arn: str | None
    execution_status: str | None  # None for ESCALATED (its execution succeeded)
    redrive: dict[str, Any] | None = None  # stopped executions: can a redrive help, and why
    # REFUND_LIMIT_REACHED (docs/design.md §3.12): the numbers {ceiling, used, asked, currency,
    # day}, and what resolving such a case means
    limit: dict[str, Any] | None = None
    resolving: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


LIMIT_REACHED = "REFUND_LIMIT_REACHED"
RESOLVING_LIMIT_REACHED = (
    "resolving records your decision for good and closes the case: it refunds nothing and "
    "gives nothing back to the day's ceiling (the refused refund charged nothing); a refund "
    "you make by other means is not counted by the ceiling, which counts the saga's refunds "
    "only (`sagactl limits` shows the day)"
)


@dataclass(frozen=True)
class Closed:
    """Why a case is not an open escalation."""

    reason: str


def assess_record(record: dict[str, Any]) -> Escalation | Closed | None:
    """Open or closed by the case record alone; None: it depends on the owning execution."""
    case_id = str(record["case_id"])
    outcome = str(record.get("outcome"))
    resolution = record.get("resolution")
    if isinstance(resolution, dict):
        return Closed(
            f"case {case_id} was resolved by {resolution.get('by')} at {resolution.get('at')}"
        )
    if outcome == CaseOutcome.ESCALATED:
        escalation = record.get("escalation") or {}
        return Escalation(
            case_id=case_id,
            tenant_id=record.get("tenant_id"),
            outcome=outcome,
            since=str(record.get("updated_at") or record.get("created_at") or ""),
            reason=str(escalation.get("reason") or "ESCALATED"),
            step=escalation.get("step"),
            detail=escalation.get("detail"),
            decision_needed=str(escalation.get("decision_needed") or "decide the case by hand"),
            execution_arn=record.get("execution_arn"),
            execution_status=None,
            **_limit_fields(escalation),
        )
    if outcome not in (CaseOutcome.IN_PROGRESS, CaseOutcome.COMPENSATION_PENDING):
        return Closed(f"case {case_id} is {outcome}: there is nothing to decide")
    return None


def _limit_fields(escalation: dict[str, Any]) -> dict[str, Any]:
    """A REFUND_LIMIT_REACHED escalation's numbers and what resolving it means; else nothing."""
    limit = escalation.get("limit")
    if escalation.get("reason") != LIMIT_REACHED or not isinstance(limit, dict):
        return {}
    return {"limit": dict(limit), "resolving": RESOLVING_LIMIT_REACHED}


def limit_text(limit: dict[str, Any]) -> str:
    """`30.00 USD a day; 20.00 USD used on 2026-12-08 (UTC); 20.00 USD asked`."""
    currency = str(limit.get("currency"))

    def money(minor: Any) -> str:
        return f"{major_units(int(minor), currency)} {currency}" if minor is not None else "?"

    return (
        f"ceiling {money(limit.get('ceiling'))} a day; {money(limit.get('used'))} used on "
        f"{limit.get('day')} (UTC); {money(limit.get('asked'))} asked"
    )


def execution_gone(record: dict[str, Any], execution_arn: str) -> Escalation:
    """An unfinished case whose owning execution Step Functions no longer keeps."""
    return Escalation(
        case_id=str(record["case_id"]),
        tenant_id=record.get("tenant_id"),
        outcome=str(record.get("outcome")),
        since=str(record.get("updated_at") or ""),
        reason="EXECUTION_NOT_FOUND",
        step=None,
        detail=f"the execution that owns the case ({execution_arn}) no longer exists",
        decision_needed=(
            "The case never finished and Step Functions no longer keeps its execution "
            "(closed executions are kept 90 days): settle its open actions by hand."
        ),
        execution_arn=execution_arn,
        execution_status=None,
    )


def still_owned(record: dict[str, Any], description: dict[str, Any]) -> Closed | None:
    """Closed while the owning execution has not stopped; None: it stopped, the case is open."""
    case_id, outcome = str(record["case_id"]), str(record.get("outcome"))
    status = str(description["status"])
    if status in REDRIVABLE_STATUSES:
        return None
    return Closed(
        f"case {case_id} is {outcome} and its execution is {status}: the automation still "
        f"owns it (`sagactl watch {case_id}`)"
        if status in ("RUNNING", "PENDING_REDRIVE")
        else f"case {case_id} is {outcome} and its execution {status}: nothing to decide"
    )


def stopped_escalation(
    record: dict[str, Any],
    description: dict[str, Any],
    failed: FailedStep | None,
    redrive: dict[str, Any] | None,
) -> Escalation:
    """An execution that stopped with the case unfinished: what failed, and whether a redrive
    can help (`redrive`: the redrive plan's own verdict; None when it was not asked)."""
    case_id = str(record["case_id"])
    status = str(description["status"])
    pending = record.get("outcome") == CaseOutcome.COMPENSATION_PENDING
    state = failed.state if failed else None
    error = (failed.error if failed else None) or description.get("error")
    cause = (failed.cause if failed else None) or error_message(description.get("cause"))
    detail = f"{status} at {state or 'an unknown state'}" + (f": {error}: {cause}" if error else "")
    unfinished = "the compensation did not finish" if pending else "the saga did not finish"
    if redrive is None:
        needed = f"The execution {status} and {unfinished}."
    elif redrive["can_help"]:
        needed = (
            f"The execution {status} at {state} and {unfinished}. Once the cause is fixed, "
            f"`sagactl redrive {case_id}` reruns {state}"
            + "".join(
                f" ({action['remaining_budget']} of {action['budget']} attempts left for "
                f"{action['action_key']})"
                for action in redrive["plan"]["actions"]
            )
            + "; or settle the case by hand and resolve it."
        )
    else:
        needed = (
            f"The execution {status} and {unfinished}, and a redrive cannot help "
            f"({redrive['reason']}). Settle the open actions by hand, by business reference, "
            "and resolve the case."
        )
    stop = description.get("stopDate")
    return Escalation(
        case_id=case_id,
        tenant_id=record.get("tenant_id"),
        outcome=str(record.get("outcome")),
        since=iso(stop) if isinstance(stop, datetime) else str(record.get("updated_at") or ""),
        reason=str(CaseOutcome.COMPENSATION_PENDING) if pending else f"EXECUTION_{status}",
        step=(failed.operation or failed.state) if failed else None,
        detail=detail,
        decision_needed=needed,
        execution_arn=str(description["executionArn"]),
        execution_status=status,
        redrive=redrive,
    )


def stops(history: list[dict[str, Any]]) -> int:
    """How often the execution ended without success (a redrive reopens it, so one execution can
    stop several times; the failed-execution rule sends one message for each)."""
    return sum(1 for event in history if event.get("type") in _STOP_EVENTS)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the queue's messages that no open case answers ----------------------------------------------
@dataclass(frozen=True)
class UnownedStops:
    """An execution that owns no open case, and the messages the failed-execution rule queued
    for its stops (one per stop: each redrive followed one)."""

    execution_name: str
    case_id: str
    status: str
    error: str | None
    messages: int
    why: str


@dataclass
class QueueNote:
    """What waits on the escalation queue besides the open cases' messages."""

    depth: int
    retention_seconds: int
    unowned: list[UnownedStops] = field(default_factory=list)

    @property
    def unowned_messages(self) -> int:
        return sum(stops.messages for stops in self.unowned)

    def to_json(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "retention_seconds": self.retention_seconds,
            "no_open_case": {
                "messages": self.unowned_messages,
                "executions": [asdict(stops) for stops in self.unowned],
            },
        }


def rejected_by_validation(description: dict[str, Any]) -> bool:
    """A FAILED execution whose error is a rejection: it stopped at RejectCase (after
    ValidateCase the same errors are caught, released and escalated, never the execution's)."""
    return description.get("status") == "FAILED" and description.get("error") in (
        VALIDATION_REJECTIONS
    )


def unowned_stops(
    description: dict[str, Any], record: dict[str, Any] | None
) -> UnownedStops | None:
    """The failed-execution rule's messages for an execution that owns no open case, and why no
    open case answers them; None when none of them can still be queued: it never stopped, its
    last stop was a refused rerun of a resolved case (ActionSettled: the rule skips it), or its
    case was resolved (`resolve` deleted the messages that name it)."""
    status = str(description["status"])
    stopped = status in REDRIVABLE_STATUSES
    error = description.get("error") if stopped else None
    messages = int(description.get("redriveCount") or 0) + (1 if stopped else 0)
    name = str(description.get("name") or description["executionArn"].rpartition(":")[2])
    case_id = str(execution_input(description).get("case_id") or name)
    if messages == 0 or error == ActionSettled.__name__:
        return None
    if rejected_by_validation(description):
        why = rejection_text(case_id, description)
    elif record is None:
        why = (
            f"{status} before ValidateCase recorded case {case_id}: nothing was done "
            f"(`sagactl status {name}` shows where it stopped)"
        )
    elif isinstance(record.get("resolution"), dict):
        return None
    elif record.get("execution_arn") not in (None, description["executionArn"]):
        why = f"case {case_id} belongs to execution {record['execution_arn']}, not this one"
    else:
        why = f"case {case_id} is {record.get('outcome')} and not open: " + (
            "a redrive finished it after these stops" if not stopped else "nothing to decide"
        )
    return UnownedStops(name, case_id, status, error, messages, why)


# --- one case in full ----------------------------------------------------------------------------
@dataclass
class EscalationView:
    """Everything a person needs to decide one case."""

    case_id: str
    tenant_id: str | None
    outcome: str | None
    open: Escalation | None
    closed_reason: str | None
    resolution: dict[str, Any] | None
    escalation: dict[str, Any] | None  # as the case record holds it (ESCALATED)
    execution: dict[str, Any] | None
    actions: list[ActionView]
    attempt_budget: int
    stops: int = 0  # times the execution ended FAILED, TIMED_OUT or ABORTED (its history)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    queue_depth: int | None = None
    # `{step: StepResult}` the execution confirmed: the case record's `steps` (RecordOutcome)
    # and its history's (sagactl.views.timeline.confirmed_steps)
    executed_steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def confirmed_effects(self) -> list[dict[str, Any]]:
        """Every forward step that took effect: from its ledger record while it is kept, else
        from what the execution recorded (a closed record expires after its retention, §3.7,
        and a person deciding must still see a refund that was made)."""
        found = []
        for action in self.actions:
            if action.step not in FORWARD_STEPS:
                continue
            if action.record and action.record["status"] == "COMPLETED":
                found.append({**_action_json(action), "source": "ledger"})
            elif action.step in self.executed_steps:
                step = self.executed_steps[action.step]
                found.append(
                    {
                        "step": action.step,
                        "action_key": step.get("action_key") or action.action_key,
                        "status": "COMPLETED",
                        "downstream_ref": step.get("downstream_ref"),
                        "source": "execution (the ledger record's retention has passed)",
                    }
                )
        return found

    @property
    def compensations(self) -> list[dict[str, Any]]:
        """The release, as far as one ran (a SETTLED record is a decision, not a release)."""
        return [
            _action_json(action)
            for action in self.actions
            if action.step not in FORWARD_STEPS
            and action.record
            and action.record["status"] != LedgerStatus.SETTLED
        ]

    @property
    def open_actions(self) -> list[dict[str, Any]]:
        return [
            _action_json(action)
            for action in self.actions
            if action.record and action.record["status"] in OPEN_STATUSES
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "tenant_id": self.tenant_id,
            "outcome": self.outcome,
            "open": self.open is not None,
            "escalation": self.open.to_json() if self.open else None,
            "closed_reason": self.closed_reason,
            "resolution": self.resolution,
            "case_escalation": self.escalation,
            "execution": self.execution,
            "attempt_budget": self.attempt_budget,
            "confirmed_effects": self.confirmed_effects,
            "compensations": self.compensations,
            "open_actions": self.open_actions,
            "notifications": self.notifications,
            "queue_depth": self.queue_depth,
        }


def _action_json(action: ActionView) -> dict[str, Any]:
    record = action.record or {}
    return {
        "step": action.step,
        "action_key": action.action_key,
        **{
            name: record.get(name)
            for name in (
                "status",
                "attempts",
                "budget",
                "remaining_budget",
                "downstream_ref",
                "business_ref",
                "error",
                "resolution",
            )
        },
    }


def notifications(view: EscalationView) -> list[dict[str, Any]]:
    """The messages this case has put on the escalation queue, from the records their producers
    read (the queue itself is not received from: see sagactl.operations.queue)."""
    found: list[dict[str, Any]] = []
    if view.resolution:
        return found  # `resolve` removed them
    if view.outcome == CaseOutcome.ESCALATED and view.escalation:
        found.append(
            {
                "kind": "CASE_ESCALATED",
                "producer": "the state machine's Escalate state (RecordOutcome), once",
                "reason": view.escalation.get("reason"),
            }
        )
    if view.stops:
        found.append(
            {
                "kind": "EXECUTION_NOT_SUCCEEDED",
                "producer": "the failed-execution rule, once per stop",
                "count": view.stops,
                "status": (view.execution or {}).get("status"),
            }
        )
    for action in view.open_actions:
        if action["resolution"] is None:
            found.append(
                {
                    "kind": "STUCK_ACTION",
                    "producer": (
                        "the sweeper, at once, then after 1, 2, 4, ... sweeps (at most daily) "
                        "while it stays open"
                    ),
                    "action_key": action["action_key"],
                    "status": action["status"],
                }
            )
    return found


# --- a person's decision -------------------------------------------------------------------------
@dataclass
class QueueCleanup:
    removed: int  # this case's messages, deleted
    released: int  # other messages, received once and made visible again at once


@dataclass
class ResolveReport:
    case_id: str
    resolution: dict[str, Any]
    settled: list[str]
    queue: QueueCleanup | None

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "resolution": self.resolution,
            "settled_actions": self.settled,
            "queue": asdict(self.queue) if self.queue else None,
        }


# --- input ---------------------------------------------------------------------------------------
def checked_text(flag: str, text: str, limit: int) -> str:
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"{flag} must not be empty")
    if len(stripped) > limit:
        raise UsageError(f"{flag} has {len(stripped)} characters; at most {limit}")
    return stripped
