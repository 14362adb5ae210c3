"""A case's execution history as readable timeline entries, and the state it failed in.

Pure: it reads GetExecutionHistory events (sagactl.operations.executions fetches them) and
never calls AWS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from saga.four_eyes import signatures_of
from sagactl.views.plain import parse_json

# The Task states that run one ledger action; ReconcileStep names its step in the payload.
STATE_OPERATIONS: dict[str, str] = {
    "ReserveStock": "reserve",
    "IssueRefund": "refund",
    "CreateShipment": "ship",
    "ReleaseReservation": "release",
}
RECONCILE_STATE = "ReconcileStep"
# The Fail state of a case ValidateCase rejected (nothing was done), and the errors that lead to
# it (after ValidateCase the same errors are caught to the release and Escalate instead).
REJECT_STATE = "RejectCase"
VALIDATION_REJECTIONS = frozenset(
    {"InvalidRequest", "AuthorizationDenied", "ApprovalMismatch", "ApprovalInvalid", "KeyConflict"}
)
_SKIPPED_EVENTS = frozenset(
    {"TaskScheduled", "TaskStarted", "TaskSubmitted", "MapRunStarted", "MapRunSucceeded"}
)
_TASK_FAILURES = frozenset(
    {"TaskFailed", "TaskTimedOut", "TaskStartFailed", "TaskSubmitFailed", "LambdaFunctionFailed"}
)
_MAX_TEXT = 300


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
        return _validated_case(payload)
    if "MessageId" in payload:
        return f"escalation message sent ({payload['MessageId']})"
    return "ok"


def _validated_case(payload: dict[str, Any]) -> str:
    """ValidateCase's result: who approved and when they signed, each co-signer too (cases
    before signed approvals carry neither)."""
    approval = (payload.get("case") or {}).get("approval") or {}
    signed = [s for s in signatures_of(approval) if s.get("approved_by") and s.get("signed_at")]
    if not signed:
        return "case valid and approved"
    who = " and ".join(f"{s['approved_by']} (signed {s['signed_at']})" for s in signed)
    return f"case valid, approved by {who}"


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
            output = parse_json(details.get("output"))
            payload = output.get("Payload", output) if isinstance(output, dict) else output
            text = f"   ok {summarize_result(payload)}"
            entries.append(TimelineEntry(event_id, stamp, "succeeded", state, text))
        elif kind in _TASK_FAILURES:
            entry, retries = _failure_entry(events, index, state, retries)
            entries.append(entry)
        elif kind == "ExecutionSucceeded":
            output = parse_json(event.get("executionSucceededEventDetails", {}).get("output"))
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
            parsed = parse_json(event.get("taskScheduledEventDetails", {}).get("parameters"))
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


# --- what the execution confirmed (its history outlives the ledger's closed records) -------------
_FORWARD_STATES = {"ReserveStock": "reserve", "IssueRefund": "refund", "CreateShipment": "ship"}


def confirmed_steps(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{step: StepResult}` of the forward steps the execution saw COMPLETED: a task of the step
    that succeeded, or a reconciliation that found the step's effect (RESUME). Step Functions
    keeps a closed execution's history 90 days, longer than a closed ledger record's retention
    (docs/design.md §3.7)."""
    confirmed: dict[str, dict[str, Any]] = {}
    state: str | None = None
    for event in events:
        kind = str(event.get("type", ""))
        if kind.endswith("StateEntered"):
            state = str(event["stateEnteredEventDetails"]["name"])
        elif kind == "TaskSucceeded":
            output = parse_json(event.get("taskSucceededEventDetails", {}).get("output"))
            payload = output.get("Payload", output) if isinstance(output, dict) else None
            if not isinstance(payload, dict):
                continue
            result: Any
            if state in _FORWARD_STATES:
                step, result = _FORWARD_STATES[state], payload
            elif state == RECONCILE_STATE and payload.get("decision") == "RESUME":
                step, result = str(payload.get("step")), payload.get("result")
            else:
                continue
            if isinstance(result, dict) and result.get("status") == "COMPLETED":
                confirmed[step] = result
    return confirmed
