"""The escalation worklist: open escalations, what each one needs, and a person's resolution.

The escalation queue notifies; it is not the worklist. Reading a message counts toward its
dead-letter redrive (maxReceiveCount 5), one case yields several messages (the Escalate state,
the failed-execution rule, and the sweeper once per sweep for each stuck action), and a message
says nothing about whether someone already decided. The cases table is the worklist
(design.md §5). A case is open while it has no `resolution` and either
- its outcome is ESCALATED: the automation finished and handed the decision to a person; or
- its outcome is IN_PROGRESS or COMPENSATION_PENDING and the execution that owns it is FAILED,
  TIMED_OUT or ABORTED: the automation stopped with its work unfinished (while the execution
  runs, the case is still the automation's).
A case rejected at ValidateCase has no case record: nothing was done, there is nothing to settle.

The cases table has only its `case_id` key, so the worklist is a paginated Scan with a filter
(it reads the whole table, one request per 1 MB page): acceptable for an operator command at
this scale. A sparse index would need an attribute that marks open cases, and nothing can write
one when an execution fails. Each IN_PROGRESS or COMPENSATION_PENDING case costs one
DescribeExecution, and each stopped one the redrive plan (`sagactl.redrive.plan_redrive`).

`resolve` records who decided what and when in the case record's `resolution` and settles the
case's open ledger actions in the same transaction (saga.cases.CaseRecords.resolve,
saga.ledger.ActionLedger.settle_write): the sweeper stops re-sending them, and no redrive or late
delivery dispatches them again. Then it removes the case's messages from the queue, the one
place where sagactl receives from it (see `remove_case_messages` for what that costs).
"""

from __future__ import annotations

import getpass
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga.cases import CaseOutcome, CaseRecords, ResolveConflict
from saga.dynamodb import from_item
from saga.errors import ActionPending, TransientError
from saga.identity import case_action_keys
from saga.ledger import OPEN_STATUSES, ActionLedger, LedgerPolicy, LedgerRecord, Resolution
from saga.models import CASE_ID_PATTERN, TENANT_ID_PATTERN
from sagactl.errors import EXIT_REFUSED, NotFound, RedriveRefused, SagactlError, UsageError
from sagactl.redrive import REDRIVABLE_STATUSES, plan_redrive
from sagactl.target import Target
from sagactl.timeline import (
    ActionView,
    FailedStep,
    case_actions,
    describe_execution_arn,
    error_message,
    escalation_queue_depth,
    execution_history,
    execution_summary,
    find_failed_step,
    read_case_record,
)

CANDIDATE_OUTCOMES = (
    CaseOutcome.ESCALATED,
    CaseOutcome.COMPENSATION_PENDING,
    CaseOutcome.IN_PROGRESS,
)
FORWARD_STEPS = ("reserve", "refund", "ship")
MAX_DECISION_CHARS = 2000
MAX_BY_CHARS = 256
# While resolve reads the queue, the messages it leaves alone stay hidden from other readers
# for at most this long; it makes them visible again as soon as it has read the queue once.
SCAN_VISIBILITY_SECONDS = 120
SCAN_WAIT_SECONDS = 1  # long polling: an empty answer means no message is visible
_RESOLVE_ROUNDS = 3
_STOP_EVENTS = frozenset({"ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"})
_SQS_BATCH = 10


class CaseNotOpen(SagactlError):
    """The case is not an open escalation (done, still running, ...): nothing to resolve."""

    exit_code = EXIT_REFUSED


class AlreadyResolved(SagactlError):
    """A person has already resolved the case; a decision is recorded once."""

    exit_code = EXIT_REFUSED


class ActionInFlight(SagactlError):
    """An attempt holds one of the case's actions right now: resolve once it has ended."""

    exit_code = EXIT_REFUSED


class QueueCleanupFailed(SagactlError):
    """The resolution is recorded, but the case's messages could not all be removed."""


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Closed:
    """Why a case is not an open escalation."""

    reason: str


def open_escalations(
    target: Target, *, budget: int, tenant: str | None = None, page_size: int | None = None
) -> list[Escalation]:
    """Every open escalation, oldest first."""
    found = []
    for record in _candidates(target, tenant=tenant, page_size=page_size):
        assessed = assess(target, record, budget=budget)
        if isinstance(assessed, Escalation):
            found.append(assessed)
    return sorted(found, key=lambda escalation: (escalation.since, escalation.case_id))


def _candidates(
    target: Target, *, tenant: str | None, page_size: int | None
) -> Iterator[dict[str, Any]]:
    """Case records without a resolution whose outcome may be open (Scan, every page)."""
    condition = "attribute_not_exists(resolution) AND outcome IN (:o0, :o1, :o2)"
    values = {f":o{n}": {"S": outcome.value} for n, outcome in enumerate(CANDIDATE_OUTCOMES)}
    if tenant is not None:
        condition += " AND tenant_id = :tenant"
        values[":tenant"] = {"S": tenant}
    pages = (
        target.client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=target.output("CasesTableName"),
            FilterExpression=condition,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            PaginationConfig={"PageSize": page_size} if page_size else {},
        )
    )
    for page in pages:
        for item in page.get("Items", []):
            yield from_item(item)


def assess(
    target: Target, record: dict[str, Any], *, budget: int, explain: bool = True
) -> Escalation | Closed:
    """Open (with the decision it needs) or closed (with why). `explain=False` skips the
    redrive plan of a stopped execution (resolve only needs to know that it is open)."""
    case_id = str(record["case_id"])
    tenant = record.get("tenant_id")
    outcome = str(record.get("outcome"))
    resolution = record.get("resolution")
    if isinstance(resolution, dict):
        return Closed(
            f"case {case_id} was resolved by {resolution.get('by')} at {resolution.get('at')}: "
            f"{resolution.get('decision')!r}"
        )
    if outcome == CaseOutcome.ESCALATED:
        escalation = record.get("escalation") or {}
        return Escalation(
            case_id=case_id,
            tenant_id=tenant,
            outcome=outcome,
            since=str(record.get("updated_at") or record.get("created_at") or ""),
            reason=str(escalation.get("reason") or "ESCALATED"),
            step=escalation.get("step"),
            detail=escalation.get("detail"),
            decision_needed=str(escalation.get("decision_needed") or "decide the case by hand"),
            execution_arn=record.get("execution_arn"),
            execution_status=None,
        )
    if outcome not in (CaseOutcome.IN_PROGRESS, CaseOutcome.COMPENSATION_PENDING):
        return Closed(f"case {case_id} is {outcome}: there is nothing to decide")
    arn = str(record.get("execution_arn") or target.execution_arn(case_id))
    description = describe_execution_arn(target, arn)
    if description is None:
        return Escalation(
            case_id=case_id,
            tenant_id=tenant,
            outcome=outcome,
            since=str(record.get("updated_at") or ""),
            reason="EXECUTION_NOT_FOUND",
            step=None,
            detail=f"the execution that owns the case ({arn}) no longer exists",
            decision_needed=(
                "The case never finished and Step Functions no longer keeps its execution "
                "(closed executions are kept 90 days): settle its open actions by hand."
            ),
            execution_arn=arn,
            execution_status=None,
        )
    status = str(description["status"])
    if status not in REDRIVABLE_STATUSES:
        return Closed(
            f"case {case_id} is {outcome} and its execution is {status}: the automation still "
            f"owns it (`sagactl watch {case_id}`)"
            if status in ("RUNNING", "PENDING_REDRIVE")
            else f"case {case_id} is {outcome} and its execution {status}: nothing to decide"
        )
    return _stopped(target, record, description, budget=budget, explain=explain)


def _stopped(
    target: Target,
    record: dict[str, Any],
    description: dict[str, Any],
    *,
    budget: int,
    explain: bool,
) -> Escalation:
    """An execution that stopped with the case unfinished: what failed, and whether a redrive
    can help (the redrive plan's own verdict)."""
    case_id = str(record["case_id"])
    status = str(description["status"])
    pending = record.get("outcome") == CaseOutcome.COMPENSATION_PENDING
    redrive: dict[str, Any] | None = None
    failed: FailedStep | None = None
    if explain:
        try:
            plan = plan_redrive(target, case_id, budget=budget)
        except (RedriveRefused, NotFound) as refused:  # NotFound: not named after the case
            redrive = {"can_help": False, "reason": str(refused)}
            failed = find_failed_step(execution_history(target, description["executionArn"]))
        else:
            failed = plan.failed_step
            redrive = {"can_help": True, "plan": plan.to_json()}
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
        since=_iso(stop) if isinstance(stop, datetime) else str(record.get("updated_at") or ""),
        reason=str(CaseOutcome.COMPENSATION_PENDING) if pending else f"EXECUTION_{status}",
        step=(failed.operation or failed.state) if failed else None,
        detail=detail,
        decision_needed=needed,
        execution_arn=str(description["executionArn"]),
        execution_status=status,
        redrive=redrive,
    )


def _stops(history: list[dict[str, Any]]) -> int:
    """How often the execution ended without success (a redrive reopens it, so one execution can
    stop several times; the failed-execution rule sends one message for each)."""
    return sum(1 for event in history if event.get("type") in _STOP_EVENTS)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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

    @property
    def confirmed_effects(self) -> list[dict[str, Any]]:
        return [
            _action_json(action)
            for action in self.actions
            if action.step in FORWARD_STEPS
            and action.record
            and action.record["status"] == "COMPLETED"
        ]

    @property
    def compensations(self) -> list[dict[str, Any]]:
        return [
            _action_json(action)
            for action in self.actions
            if action.step not in FORWARD_STEPS and action.record
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


def show(target: Target, case_id: str, *, budget: int) -> EscalationView:
    check_case_id(case_id)
    record = _case_record(target, case_id)
    assessed = assess(target, record, budget=budget)
    tenant = record.get("tenant_id")
    arn = str(record.get("execution_arn") or target.execution_arn(case_id))
    description = describe_execution_arn(target, arn)
    view = EscalationView(
        case_id=case_id,
        tenant_id=tenant,
        outcome=record.get("outcome"),
        open=assessed if isinstance(assessed, Escalation) else None,
        closed_reason=assessed.reason if isinstance(assessed, Closed) else None,
        resolution=record.get("resolution"),
        escalation=record.get("escalation"),
        execution=execution_summary(description) if description else None,
        actions=case_actions(target, str(tenant), case_id, budget) if tenant else [],
        attempt_budget=budget,
        stops=_stops(execution_history(target, arn)) if description else 0,
        queue_depth=escalation_queue_depth(target),
    )
    view.notifications = _notifications(view)
    return view


def _notifications(view: EscalationView) -> list[dict[str, Any]]:
    """The messages this case has put on the escalation queue, from the records their producers
    read (the queue itself is not received from: see the module doc)."""
    found: list[dict[str, Any]] = []
    if view.resolution:
        return found  # `resolve` removed them
    if view.outcome == CaseOutcome.ESCALATED and view.escalation:
        found.append(
            {
                "kind": "CASE_ESCALATED",
                "producer": "the state machine's Escalate state, once",
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
                    "producer": "the sweeper, on every sweep while the action stays open",
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


def resolve(target: Target, case_id: str, *, decision: str, by: str, budget: int) -> ResolveReport:
    """Record the decision and settle the case's open actions (one transaction, conditional on
    what was read; read again when something changed), then remove the case's messages."""
    check_case_id(case_id)
    decision = _checked_text("--decision", decision, MAX_DECISION_CHARS)
    by = _checked_text("--by", by, MAX_BY_CHARS)
    cases = CaseRecords(target.client("dynamodb"), target.output("CasesTableName"))
    ledger = ActionLedger(
        target.output("LedgerTableName"),
        target.client("dynamodb"),
        LedgerPolicy(attempt_budget=budget),
        clock=target.now,
    )
    for _ in range(_RESOLVE_ROUNDS):
        record = _case_record(target, case_id)
        assessed = assess(target, record, budget=budget, explain=False)
        if isinstance(assessed, Closed):
            kind = AlreadyResolved if record.get("resolution") else CaseNotOpen
            raise kind(f"{assessed.reason}; not resolved")
        at = _iso(datetime.fromtimestamp(target.now(), UTC))
        resolution = Resolution(by=by, decision=decision, at=at)
        open_records = _open_records(ledger, record)
        try:
            settle = [ledger.settle_write(seen, resolution) for seen in open_records]
        except ActionPending as held:
            raise ActionInFlight(f"case {case_id}: {held.message}; nothing was resolved") from None
        settled = [seen.action_key for seen in open_records]
        recorded: dict[str, Any] = {**resolution.to_record(), "settled_actions": settled}
        try:
            cases.resolve(record, recorded, settle=settle)
        except ResolveConflict:
            continue  # the case or an action changed since it was read: decide again
        except TransientError as exc:
            raise SagactlError(f"{exc.message}; nothing was resolved") from None
        queue = _remove_after_resolve(target, record, recorded)
        return ResolveReport(case_id, recorded, settled, queue)
    raise SagactlError(
        f"case {case_id} changed while it was being resolved ({_RESOLVE_ROUNDS} times); "
        "nothing was resolved: look at it again (`sagactl escalations show`) and retry"
    )


def _open_records(ledger: ActionLedger, record: dict[str, Any]) -> list[LedgerRecord]:
    keys = case_action_keys(str(record["tenant_id"]), str(record["case_id"]))
    found = []
    for key in keys.values():
        seen = ledger.get(key)
        if seen is not None and seen.status in OPEN_STATUSES and seen.resolution is None:
            found.append(seen)
    return found


def _remove_after_resolve(
    target: Target, record: dict[str, Any], resolution: dict[str, Any]
) -> QueueCleanup | None:
    case_id = str(record["case_id"])
    try:
        return remove_case_messages(target, case_id, execution_arn=record.get("execution_arn"))
    except (ClientError, BotoCoreError, SagactlError) as exc:
        raise QueueCleanupFailed(
            f"case {case_id} is resolved ({resolution['by']}: {resolution['decision']!r}) and "
            f"{len(resolution['settled_actions'])} action(s) are settled, but removing its "
            f"messages from the escalation queue failed: {exc}. The case is closed (the worklist "
            "is the cases table); its messages stay on the queue"
        ) from None


def remove_case_messages(
    target: Target, case_id: str, *, execution_arn: str | None = None
) -> QueueCleanup | None:
    """Delete this case's messages from the escalation queue; leave every other one as it was,
    visible again at once. None when the stack has no queue output.

    SQS cannot be filtered or peeked: a message is read only by receiving it, and every receive
    adds one to its ApproximateReceiveCount. So this reads each message on the queue once (the
    ones it keeps stay hidden from other readers until it has read the queue through, at most
    SCAN_VISIBILITY_SECONDS), deletes those that name the case (`case_id`, or the execution that
    owns it), and makes the others visible again immediately. The cost: each resolve counts one
    receive on every other message; a message nobody consumes that sits through five resolves
    moves to the dead-letter queue at its next receive (maxReceiveCount 5). `escalations show`
    never receives. A message sent while this runs, or after (a sweep that read the index just
    before the decision), may stay: it names a case the worklist shows as resolved.
    """
    url = target.optional_output("EscalationQueueUrl")
    if not url:
        return None
    sqs = target.client("sqs")
    others: dict[str, str] = {}  # message id -> receipt handle, to make visible again
    removed: set[str] = set()
    try:
        while True:
            batch = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=_SQS_BATCH,
                VisibilityTimeout=SCAN_VISIBILITY_SECONDS,
                WaitTimeSeconds=SCAN_WAIT_SECONDS,
            ).get("Messages", [])
            if not batch:
                break
            mine = []
            for message in batch:
                if _names_case(message.get("Body", ""), case_id, execution_arn):
                    mine.append(message)
                else:
                    others[message["MessageId"]] = message["ReceiptHandle"]
            if mine:
                _delete(sqs, url, mine)
                removed.update(message["MessageId"] for message in mine)
    finally:
        _make_visible(sqs, url, others)
    return QueueCleanup(removed=len(removed), released=len(others))


def _names_case(body: str, case_id: str, execution_arn: str | None) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict):
        return False
    if message.get("case_id") == case_id:
        return True
    executions = {message.get("execution"), message.get("execution_arn")}
    return execution_arn is not None and execution_arn in executions


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    response = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]}
            for n, message in enumerate(messages)
        ],
    )
    failed = response.get("Failed") or []
    if failed:
        reasons = ", ".join(f"{entry.get('Code')}: {entry.get('Message')}" for entry in failed)
        raise SagactlError(f"{len(failed)} message(s) were not deleted ({reasons})")


def _make_visible(sqs: Any, url: str, handles: dict[str, str]) -> None:
    entries = [
        {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": 0}
        for n, handle in enumerate(handles.values())
    ]
    for start in range(0, len(entries), _SQS_BATCH):
        sqs.change_message_visibility_batch(
            QueueUrl=url, Entries=entries[start : start + _SQS_BATCH]
        )


# --- input and identity --------------------------------------------------------------------------
def check_case_id(case_id: str) -> None:
    if not re.fullmatch(CASE_ID_PATTERN, case_id):
        raise UsageError(f"{case_id!r} is not a case id (letters, digits, '-', '_'; at most 80)")


def check_tenant(tenant: str) -> None:
    if not re.fullmatch(TENANT_ID_PATTERN, tenant):
        raise UsageError(f"{tenant!r} is not a tenant id (lowercase letters, digits, '-')")


def _checked_text(flag: str, text: str, limit: int) -> str:
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"{flag} must not be empty")
    if len(stripped) > limit:
        raise UsageError(f"{flag} has {len(stripped)} characters; at most {limit}")
    return stripped


def caller_identity(target: Target) -> str:
    """Who runs this: the STS caller ARN on AWS; the operating-system user locally (the local
    AWS accepts any credentials, so its caller identity would name nobody)."""
    if target.local:
        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return f"uid {os.getuid()}"
    return str(target.client("sts").get_caller_identity()["Arn"])


def _case_record(target: Target, case_id: str) -> dict[str, Any]:
    record = read_case_record(target, case_id)
    if record is None:
        raise NotFound(
            f"no case record for {case_id}: a case rejected at ValidateCase has none (nothing "
            f"was done, nothing to decide; `sagactl status {case_id}` shows why)"
        )
    return record
