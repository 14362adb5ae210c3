"""The redrive state of a local execution, as Step Functions shows it: its bookkeeping (count,
date, the clientTokens answered), its `redriveStatus` and reason, and DescribeExecution's fields.

Times are read from `saga.clock.now()`: the one clock of the local AWS process, which the
emulator may move. local_aws.redrive makes moto's interpreter redrive.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from saga import clock

REDRIVE_WINDOW_SECONDS = 14 * 86400
MAX_OPEN_SECONDS = 365 * 86400
# "The execution event history count is less than 24,999": a redrive appends ExecutionRedriven
# and at least one more event under the 25,000-event limit (RedriveExecution, API reference).
REDRIVE_HISTORY_LIMIT = 24_999
CLIENT_TOKEN_MEMORY = 10
CLIENT_TOKEN_SECONDS = 15 * 60
REDRIVABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
REDRIVABLE = "REDRIVABLE"
NOT_REDRIVABLE = "NOT_REDRIVABLE"

# redriveStatusReason, as Step Functions words it.
REASON_RUNNING = "Execution is RUNNING and cannot be redriven"
REASON_SUCCEEDED = "Execution is SUCCEEDED and cannot be redriven"
REASON_PERIOD = "Execution redrivable period exceeded"
REASON_MAX_TIME = "Execution has exceeded the max execution time"
REASON_HISTORY = "Execution history event limit exceeded"


def local_now() -> datetime.datetime:
    return datetime.datetime.fromtimestamp(clock.now(), tz=datetime.UTC)


@dataclass(frozen=True)
class EnteredState:
    """What a top-level state saw when it was entered: where a redrive resumes."""

    name: str
    input: Any
    variables: dict[str, Any]


@dataclass
class RedriveRecord:
    """The redrive bookkeeping of one execution (kept on moto's Execution object)."""

    count: int = 0
    date: datetime.datetime | None = None
    # clientToken -> (first use, the redriveDate it answered): the last CLIENT_TOKEN_MEMORY.
    tokens: dict[str, tuple[datetime.datetime, datetime.datetime]] = field(default_factory=dict)

    def answered(self, token: str | None, now: datetime.datetime) -> datetime.datetime | None:
        if token is None or token not in self.tokens:
            return None
        first_use, redrive_date = self.tokens[token]
        if (now - first_use).total_seconds() > CLIENT_TOKEN_SECONDS:
            return None
        return redrive_date

    def remember(self, token: str | None, now: datetime.datetime) -> None:
        if token is None:
            return
        self.tokens.pop(token, None)
        self.tokens[token] = (now, now)
        while len(self.tokens) > CLIENT_TOKEN_MEMORY:
            self.tokens.pop(next(iter(self.tokens)))


def record_of(execution: Any) -> RedriveRecord:
    record = getattr(execution, "_saga_redrive", None)
    if record is None:
        record = RedriveRecord()
        execution._saga_redrive = record
    return record


def _aware(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def _history_length(execution: Any) -> int:
    env = getattr(execution.exec_worker, "env", None)
    return len(env.event_manager.get_event_history()) if env is not None else 0


def redrive_status(execution: Any, now: datetime.datetime) -> tuple[str, str | None]:
    """(redriveStatus, redriveStatusReason) of an execution at `now`."""
    status = str(execution.status)
    if status == "RUNNING" or status not in REDRIVABLE_STATUSES:
        return NOT_REDRIVABLE, REASON_SUCCEEDED if status == "SUCCEEDED" else REASON_RUNNING
    stop = execution.stop_date
    if stop is not None and (now - _aware(stop)).total_seconds() > REDRIVE_WINDOW_SECONDS:
        return NOT_REDRIVABLE, REASON_PERIOD
    if (now - _aware(execution.start_date)).total_seconds() > MAX_OPEN_SECONDS:
        return NOT_REDRIVABLE, REASON_MAX_TIME
    if _history_length(execution) >= REDRIVE_HISTORY_LIMIT:
        return NOT_REDRIVABLE, REASON_HISTORY
    return REDRIVABLE, None


def execution_description(execution: Any, now: datetime.datetime | None = None) -> dict[str, Any]:
    """DescribeExecution's fields of a moto execution, redrive fields included."""
    status = str(execution.status)
    description: dict[str, Any] = {
        "executionArn": execution.execution_arn,
        "stateMachineArn": execution.state_machine_arn,
        "name": execution.name,
        "status": status,
        "startDate": execution.start_date,
        "input": execution.execution_input,
        "inputDetails": {"included": True},
    }
    if status != "RUNNING" and execution.stop_date is not None:
        description["stopDate"] = execution.stop_date
    if status == "SUCCEEDED":
        output = execution.output
        description["output"] = output if isinstance(output, str) else _json_text(output)
        description["outputDetails"] = {"included": True}
    if execution.error is not None:
        description["error"] = execution.error
    if execution.cause is not None:
        description["cause"] = execution.cause
    record = record_of(execution)
    description["redriveCount"] = record.count
    if record.date is not None:
        description["redriveDate"] = record.date
    redrive, reason = redrive_status(execution, now or local_now())
    description["redriveStatus"] = redrive
    if reason is not None:
        description["redriveStatusReason"] = reason
    return description


def _json_text(value: Any) -> str:
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

    return str(to_json_str(value, separators=(",", ":")))
