"""One readable timeline of a case, from the standard read APIs only.

Sources: DescribeExecution + GetExecutionHistory (the states the execution went through, with
retries and caught errors), the action ledger (each action's record), the sandbox tables (effects
counted by `case_id`), the reservations table, the cases table (the terminal outcome) and the
escalation queue's depth. The queue is never received from: a peek counts as a receive and would
push the operators' messages towards the dead-letter queue.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from saga.dynamodb import from_item
from saga.identity import case_action_keys, execution_name
from saga.ledger import ActionLedger, LedgerPolicy, LedgerRecord
from sagactl.errors import NotFound
from sagactl.target import PROJECT_ROOT, Target

MAX_REVISIONS_SEARCHED = 100  # re-approved revisions looked for by name, without a case record

TERMINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
STEP_OPERATIONS: tuple[str, ...] = ("reserve", "refund", "ship", "release")
# The Task states that run one ledger action; ReconcileStep names its step in the payload.
STATE_OPERATIONS: dict[str, str] = {
    "ReserveStock": "reserve",
    "IssueRefund": "refund",
    "CreateShipment": "ship",
    "ReleaseReservation": "release",
}
RECONCILE_STATE = "ReconcileStep"
_SKIPPED_EVENTS = frozenset(
    {"TaskScheduled", "TaskStarted", "TaskSubmitted", "MapRunStarted", "MapRunSucceeded"}
)
_TASK_FAILURES = frozenset(
    {"TaskFailed", "TaskTimedOut", "TaskStartFailed", "TaskSubmitFailed", "LambdaFunctionFailed"}
)
_MAX_TEXT = 300


# --- plain data ----------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """JSON-able: Decimals to int/float, datetimes to ISO strings, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    return value


def error_message(cause: str | None) -> str | None:
    """The Lambda error message inside a Step Functions cause, else the cause itself."""
    if not cause:
        return cause
    try:
        parsed = json.loads(cause)
    except ValueError:
        return cause[:_MAX_TEXT]
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        return str(parsed["errorMessage"])[:_MAX_TEXT]
    return cause[:_MAX_TEXT]


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def default_attempt_budget() -> int:
    """The ledger's lifetime attempt budget from cdk.json context (the one config place)."""
    try:
        context = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
        return int(context["ledger"]["attempt_budget"])
    except (OSError, ValueError, KeyError, TypeError):
        return LedgerPolicy().attempt_budget


def resolve_budget(target: Target, override: int | None = None) -> int:
    """--budget, else the stack's `AttemptBudget` output when it has one, else cdk.json."""
    if override:
        return override
    declared = target.optional_output("AttemptBudget")
    if declared and declared.isdigit():
        return int(declared)
    return default_attempt_budget()


# --- the execution history as timeline entries ----------------------------------------------------
@dataclass
class TimelineEntry:
    event_id: int
    timestamp: str
    kind: str  # started | entered | succeeded | retry | caught | failed | pending | execution_*
    state: str | None
    text: str
    error: str | None = None
    cause: str | None = None
    final: bool = True  # False: classified by an event that has not happened yet (watch waits)


def _timestamp(event: dict[str, Any]) -> str:
    value = event.get("timestamp")
    return value.isoformat() if isinstance(value, datetime) else str(value or "")


def summarize_result(payload: Any) -> str:
    """One line for a task result: ledger outcome, reconcile decision, case outcome, message."""
    if not isinstance(payload, dict):
        return "ok"
    if "action_key" in payload and "status" in payload:
        flags = [name for name in ("replayed", "reconciled") if payload.get(name)]
        ref = payload.get("downstream_ref")
        text = f"{payload['status']} {payload['action_key']} (attempts {payload.get('attempts')})"
        if ref:
            text += f" ref {ref}"
        return text + (f" [{', '.join(flags)}]" if flags else "")
    if "decision" in payload:
        return f"{payload.get('step')}: {payload['decision']} ({payload.get('reason')})"
    if "outcome" in payload:
        return f"case outcome {payload['outcome']}"
    if "actions" in payload:
        approval = (payload.get("case") or {}).get("approval") or {}
        if approval.get("approved_by") and approval.get("signed_at"):
            return (
                f"case valid, approved by {approval['approved_by']} "
                f"(signed {approval['signed_at']})"
            )
        return "case valid and approved"
    if "MessageId" in payload:
        return f"escalation message sent ({payload['MessageId']})"
    return "ok"


def build_entries(events: list[dict[str, Any]]) -> list[TimelineEntry]:
    entries: list[TimelineEntry] = []
    state: str | None = None
    retries = 0
    for index, event in enumerate(events):
        kind = str(event.get("type", ""))
        event_id = int(event.get("id", index + 1))
        stamp = _timestamp(event)
        if kind in _SKIPPED_EVENTS or kind.endswith("StateExited"):
            continue
        if kind == "ExecutionStarted":
            entries.append(TimelineEntry(event_id, stamp, "started", None, "execution started"))
        elif kind.endswith("StateEntered"):
            state = str(event.get("stateEnteredEventDetails", {}).get("name"))
            retries = 0
            entries.append(TimelineEntry(event_id, stamp, "entered", state, f"-> {state}"))
        elif kind == "TaskSucceeded":
            details = event.get("taskSucceededEventDetails", {})
            output = _json(details.get("output"))
            payload = output.get("Payload", output) if isinstance(output, dict) else output
            text = f"   ok {summarize_result(payload)}"
            entries.append(TimelineEntry(event_id, stamp, "succeeded", state, text))
        elif kind in _TASK_FAILURES:
            entry, retries = _failure_entry(events, index, state, retries)
            entries.append(entry)
        elif kind == "ExecutionSucceeded":
            output = _json(event.get("executionSucceededEventDetails", {}).get("output"))
            outcome = output.get("outcome") if isinstance(output, dict) else None
            text = "execution SUCCEEDED" + (f": case {outcome}" if outcome else "")
            entries.append(TimelineEntry(event_id, stamp, "execution_succeeded", None, text))
        elif kind in ("ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"):
            details = _details(event)
            status = kind.removeprefix("Execution").upper().replace("TIMEDOUT", "TIMED_OUT")
            error = details.get("error")
            message = error_message(details.get("cause"))
            text = f"execution {status}" + (f": {error}: {message}" if error else "")
            entries.append(
                TimelineEntry(
                    event_id, stamp, f"execution_{status.lower()}", state, text, error, message
                )
            )
        elif kind == "ExecutionRedriven":
            count = event.get("executionRedrivenEventDetails", {}).get("redriveCount")
            entries.append(
                TimelineEntry(event_id, stamp, "redriven", None, f"execution redriven ({count})")
            )
    return entries


def _failure_entry(
    events: list[dict[str, Any]], index: int, state: str | None, retries: int
) -> tuple[TimelineEntry, int]:
    """A failed task attempt, classified by what happened next: retry, catch or the end."""
    event = events[index]
    details = _details(event)
    error = str(details.get("error", event.get("type")))
    message = error_message(details.get("cause"))
    follow = _next_meaningful(events, index)
    if follow is None:
        kind, how, final = "pending", "", False
    elif follow.get("type") == "TaskScheduled":
        retries += 1
        kind, how, final = "retry", f" -> retry {retries}", True
    elif str(follow.get("type", "")).startswith("Execution"):
        kind, how, final = "failed", " -> execution failed here", True
    else:
        kind, how, final = "caught", f" -> caught, next {_next_state_name(events, index)}", True
    entry = TimelineEntry(
        int(event.get("id", index + 1)),
        _timestamp(event),
        kind,
        state,
        f"   {error}: {message}{how}",
        error,
        message,
        final,
    )
    return entry, retries


def _details(event: dict[str, Any]) -> dict[str, Any]:
    """The `...EventDetails` of a history event (each event type names its own)."""
    for name, value in event.items():
        if name.endswith("EventDetails") and isinstance(value, dict):
            return value
    return {}


def _next_meaningful(events: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
    for event in events[index + 1 :]:
        if event.get("type") != "TaskStarted":
            return event
    return None


def _next_state_name(events: list[dict[str, Any]], index: int) -> str:
    for event in events[index + 1 :]:
        if str(event.get("type", "")).endswith("StateEntered"):
            return str(event["stateEnteredEventDetails"]["name"])
    return "?"


# --- the failed step (what a redrive reruns) ------------------------------------------------------
@dataclass
class FailedStep:
    state: str
    operation: str | None  # the ledger action the state runs (None: no ledger action)
    function_name: str | None
    payload: dict[str, Any] | None  # the Lambda payload of the state's last invoke
    error: str | None
    cause: str | None


def find_failed_step(events: list[dict[str, Any]]) -> FailedStep | None:
    """The state the execution stopped in: entered last and never exited."""
    state: str | None = None
    exited = True
    parameters: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = None
    for event in events:
        kind = str(event.get("type", ""))
        if kind.endswith("StateEntered"):
            state, exited, parameters, error, cause = (
                str(event["stateEnteredEventDetails"]["name"]),
                False,
                None,
                None,
                None,
            )
        elif kind.endswith("StateExited"):
            exited = True
        elif kind == "TaskScheduled":
            parsed = _json(event.get("taskScheduledEventDetails", {}).get("parameters"))
            parameters = parsed if isinstance(parsed, dict) else None
        elif kind in _TASK_FAILURES:
            details = _details(event)
            error, cause = details.get("error"), error_message(details.get("cause"))
    if state is None or exited:
        return None
    payload = parameters.get("Payload") if parameters else None
    payload = payload if isinstance(payload, dict) else None
    operation = STATE_OPERATIONS.get(state)
    if state == RECONCILE_STATE and payload is not None:
        operation = str(payload.get("step")) if payload.get("step") else None
    function = parameters.get("FunctionName") if parameters else None
    return FailedStep(
        state=state,
        operation=operation,
        function_name=str(function) if function else None,
        payload=payload,
        error=error,
        cause=cause,
    )


# --- the whole view -------------------------------------------------------------------------------
@dataclass
class ActionView:
    step: str
    action_key: str
    record: dict[str, Any] | None

    @property
    def attempts(self) -> int:
        return int(self.record["attempts"]) if self.record else 0


@dataclass
class CaseView:
    case_id: str
    tenant_id: str | None
    execution: dict[str, Any] | None
    console_url: str | None
    timeline: list[TimelineEntry]
    actions: list[ActionView]
    effects: dict[str, Any]
    compensations: list[Any]
    escalation: dict[str, Any] | None
    escalation_queue_depth: int | None
    case_record: dict[str, Any] | None
    attempt_budget: int
    now: float  # the target's now when this view was gathered (lease ends are relative to it)
    failed_step: FailedStep | None = None
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def status(self) -> str | None:
        return self.execution["status"] if self.execution else None

    @property
    def outcome(self) -> str | None:
        return self.case_record.get("outcome") if self.case_record else None

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "tenant_id": self.tenant_id,
            "status": self.status,
            "outcome": self.outcome,
            "execution": self.execution,
            "console_url": self.console_url,
            "timeline": [asdict(entry) for entry in self.timeline],
            "actions": actions_json(self.actions),
            "attempt_budget": self.attempt_budget,
            "effects": self.effects,
            "compensations": self.compensations,
            "escalation": self.escalation,
            "escalation_queue_depth": self.escalation_queue_depth,
            "case_record": self.case_record,
            "failed_step": asdict(self.failed_step) if self.failed_step else None,
        }


def describe_execution_arn(target: Target, execution_arn: str) -> dict[str, Any] | None:
    """DescribeExecution; None when there is no such execution."""
    try:
        description: dict[str, Any] = target.client("stepfunctions").describe_execution(
            executionArn=execution_arn
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            return None
        raise
    return description


@dataclass(frozen=True)
class CaseExecution:
    """A case and the execution that is its run (None: its record outlived the execution)."""

    case_id: str
    record: dict[str, Any] | None
    description: dict[str, Any] | None

    def require(self) -> dict[str, Any]:
        """The execution's description; NotFound when only the record is left."""
        if self.description is None:
            outcome = self.record.get("outcome") if self.record else None
            raise NotFound(
                f"case {self.case_id} has a record (outcome {outcome}) but its execution is "
                "gone (Step Functions keeps closed executions for 90 days)"
            )
        return self.description


def find_case_execution(target: Target, case: str) -> CaseExecution:
    """The execution of a case as the commands take CASE: the execution the case record names
    (the one that passed ValidateCase first: a re-approved revision runs under another name
    than the case id, a console start under any name), else the execution named `case`. That
    name may also be an execution's own (`case-7--r2`): the case id is then its input's."""
    record = read_case_record(target, case)
    owner = record.get("execution_arn") if record else None
    if isinstance(owner, str):
        description = describe_execution_arn(target, owner)
        if description is not None:
            return CaseExecution(case, record, description)
    by_name = target.execution_arn(case)
    description = _newest_revision(target, case, describe_execution_arn(target, by_name))
    if description is None:
        if record is None:
            raise NotFound(f"no execution for case {case} ({by_name})")
        return CaseExecution(case, record, None)
    case_input = _json(description.get("input"))
    case_id = case_input.get("case_id") if isinstance(case_input, dict) else None
    if isinstance(case_id, str) and case_id and case_id != case:
        return CaseExecution(case_id, read_case_record(target, case_id), description)
    return CaseExecution(case, record, description)


def _newest_revision(
    target: Target, case: str, first: dict[str, Any] | None
) -> dict[str, Any] | None:
    """With no case record yet (a re-approved revision's ValidateCase has not run, or rejected
    it), the execution of the case's newest approved revision (`case--r2`, ...), else `first`."""
    newest = first
    for revision in range(2, MAX_REVISIONS_SEARCHED):
        found = describe_execution_arn(target, target.execution_arn(execution_name(case, revision)))
        if found is None:
            break
        newest = found
    return newest


def describe_execution(target: Target, case: str) -> dict[str, Any]:
    """DescribeExecution of the case's execution (find_case_execution); NotFound if none."""
    return find_case_execution(target, case).require()


def execution_summary(description: dict[str, Any]) -> dict[str, Any]:
    keys = ("executionArn", "name", "status", "startDate", "stopDate", "error", "redriveCount")
    summary = {key: plain(description[key]) for key in keys if key in description}
    summary["cause"] = error_message(description.get("cause"))
    for key in ("redriveStatus", "redriveStatusReason", "redriveDate"):
        if key in description:
            summary[key] = plain(description[key])
    output = _json(description.get("output"))
    if output is not None:
        summary["output"] = output
    return summary


def execution_history(target: Target, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    paginator = target.client("stepfunctions").get_paginator("get_execution_history")
    for page in paginator.paginate(executionArn=execution_arn, includeExecutionData=True):
        events.extend(page["events"])
    return events


def ledger_for(target: Target) -> ActionLedger:
    return ActionLedger(target.output("LedgerTableName"), target.client("dynamodb"), LedgerPolicy())


def record_summary(record: LedgerRecord, budget: int) -> dict[str, Any]:
    return {
        "action_key": record.action_key,
        "status": record.status.value,
        "attempts": record.attempts,
        "budget": budget,
        "remaining_budget": max(0, budget - record.attempts),
        "downstream_ref": record.downstream_ref,
        "business_ref": record.business_ref,
        "owner": record.owner,
        "lease_expires_at": record.lease_expires_at,
        "error": record.error,
        "result": plain(record.result),
        "case_id": record.case_id,
        "execution_arn": record.execution_arn,
        "compensates": record.compensates,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "expires_at": record.expires_at,
        "resolution": record.resolution,
    }


def case_actions(target: Target, tenant_id: str, case_id: str, budget: int) -> list[ActionView]:
    """Each of the case's actions, in saga order, with its ledger record (None: no record)."""
    ledger = ledger_for(target)
    keys = case_action_keys(tenant_id, case_id)
    actions = []
    for step in STEP_OPERATIONS:
        record = ledger.get(keys[step])
        actions.append(
            ActionView(step, keys[step], record_summary(record, budget) if record else None)
        )
    return actions


def actions_json(actions: list[ActionView]) -> dict[str, Any]:
    """`{step: {"action_key", "record"}}`: the actions as `status --json` and `ledger --json`
    show them."""
    return {view.step: {"action_key": view.action_key, "record": view.record} for view in actions}


def read_case_record(target: Target, case_id: str) -> dict[str, Any] | None:
    response = target.client("dynamodb").get_item(
        TableName=target.output("CasesTableName"),
        Key={"case_id": {"S": case_id}},
        ConsistentRead=True,
    )
    item = response.get("Item")
    return from_item(item) if item else None


def count_items(target: Target, table: str, case_id: str) -> int:
    """Items in a sandbox table with this top-level `case_id` (duplicates show up as counts)."""
    paginator = target.client("dynamodb").get_paginator("scan")
    total = 0
    for page in paginator.paginate(
        TableName=table,
        FilterExpression="case_id = :case",
        ExpressionAttributeValues={":case": {"S": case_id}},
        Select="COUNT",
        ConsistentRead=True,
    ):
        total += int(page.get("Count", 0))
    return total


def read_effects(target: Target, case_id: str, keys: dict[str, str] | None) -> dict[str, Any]:
    effects: dict[str, Any] = {}
    for name, output in (("refunds", "PaymentsTableName"), ("shipments", "ShipmentsTableName")):
        table = target.optional_output(output)
        effects[name] = count_items(target, table, case_id) if table else None
    reservations = target.optional_output("ReservationsTableName")
    if reservations and keys:
        item = (
            target.client("dynamodb")
            .get_item(
                TableName=reservations,
                Key={"reservation_id": {"S": keys["reserve"]}},
                ConsistentRead=True,
            )
            .get("Item")
        )
        reservation = from_item(item) if item else None
        effects["reservation"] = (
            {
                key: reservation.get(key)
                for key in ("status", "sku", "quantity", "released_by")
                if key in reservation
            }
            if reservation
            else None
        )
    return effects


def escalation_queue_depth(target: Target) -> int | None:
    queue = target.optional_output("EscalationQueueUrl")
    if not queue:
        return None
    attributes = target.client("sqs").get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", 0))


def gather(
    target: Target, case: str, *, budget: int | None = None, execution_arn: str | None = None
) -> CaseView:
    """Everything known about a case (find_case_execution; NotFound when there is neither an
    execution nor a case record), or about one of its executions (`execution_arn`)."""
    budget = resolve_budget(target, budget)
    if execution_arn is None:
        found = find_case_execution(target, case)
    else:
        chosen = describe_execution_arn(target, execution_arn)
        if chosen is None:
            raise NotFound(f"no execution {execution_arn}")
        chosen_input = _json(chosen.get("input"))
        named = chosen_input.get("case_id") if isinstance(chosen_input, dict) else None
        case = named if isinstance(named, str) and named else case
        found = CaseExecution(case, read_case_record(target, case), chosen)
    case_id, case_record, description = found.case_id, found.record, found.description
    history = execution_history(target, description["executionArn"]) if description else []
    execution = execution_summary(description) if description else None
    case_input = _json(description.get("input")) if description else None
    tenant = (case_record or {}).get("tenant_id") or (
        case_input.get("tenant_id") if isinstance(case_input, dict) else None
    )
    keys = case_action_keys(str(tenant), case_id) if tenant else None
    actions = case_actions(target, str(tenant), case_id, budget) if tenant else []
    output = execution.get("output") if execution else None
    output = output if isinstance(output, dict) else {}
    compensations = output.get("compensations") or (case_record or {}).get("compensations") or []
    escalation = output.get("escalation") or (case_record or {}).get("escalation")
    status = execution["status"] if execution else None
    return CaseView(
        case_id=case_id,
        tenant_id=str(tenant) if tenant else None,
        execution=execution,
        console_url=target.console_url(execution["executionArn"]) if execution else None,
        timeline=build_entries(history),
        actions=actions,
        effects=read_effects(target, case_id, keys),
        compensations=list(compensations),
        escalation=escalation,
        escalation_queue_depth=escalation_queue_depth(target),
        case_record=case_record,
        attempt_budget=budget,
        now=target.now(),
        failed_step=find_failed_step(history)
        if status in ("FAILED", "TIMED_OUT", "ABORTED")
        else None,
        history=history,
    )
