"""RedriveExecution in the local AWS, as Step Functions does it (moto 5.2.5 has none).

What Step Functions documents, and what this module makes moto's interpreter do:
- a redrive continues a FAILED, TIMED_OUT or ABORTED execution of a STANDARD state machine from
  the state it stopped in, with the input and the workflow variables that state had when it was
  entered; the states that succeeded are not rerun, and the same execution ARN and definition
  are used;
- the rerun state starts afresh: its Retry counters, its TimeoutSeconds and the execution-level
  TimeoutSeconds start again;
- `$states.context.Execution.RedriveCount` is 0 before any redrive, then 1, 2, ...;
  `RedriveTime` is the time of the last redrive;
- the history keeps every earlier event and continues with an `ExecutionRedriven` event
  (`executionRedrivenEventDetails.redriveCount`);
- DescribeExecution and ListExecutions show `redriveCount`, `redriveDate`, `redriveStatus`
  (REDRIVABLE / NOT_REDRIVABLE) and `redriveStatusReason`; ListExecutions takes `redriveFilter`;
- RedriveExecution refuses with `ExecutionNotRedrivable` (message: the documented
  `redriveStatusReason`) a RUNNING or SUCCEEDED execution, one closed more than 14 days ago,
  open for more than a year or with 25,000 history events; it answers idempotently for the last
  10 `clientToken`s, each for 15 minutes after its first use.

Times (close, redrive, the 14-day window) are read from `saga.clock.now()`: the one clock of the
local AWS process, which the emulator may move.

Locally, a failed Map or Parallel state reruns whole (Step Functions reruns only the failed
iterations or branches); the saga's state machine has neither.
"""

from __future__ import annotations

import copy
import datetime
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from saga import clock

REDRIVE_WINDOW_SECONDS = 14 * 86400
MAX_OPEN_SECONDS = 365 * 86400
HISTORY_EVENT_LIMIT = 25_000
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

_MARK = "_saga_redrive_hook"
_LOCK = threading.RLock()


def _now() -> datetime.datetime:
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
    if _history_length(execution) >= HISTORY_EVENT_LIMIT:
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
    redrive, reason = redrive_status(execution, now or _now())
    description["redriveStatus"] = redrive
    if reason is not None:
        description["redriveStatusReason"] = reason
    return description


def _json_text(value: Any) -> str:
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

    return str(to_json_str(value, separators=(",", ":")))


# --- the hooks into moto's interpreter -----------------------------------------------------------


def _once(target: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    original = getattr(target, name)
    if getattr(original, _MARK, False):
        return
    wrapped = wrap(original)
    setattr(wrapped, _MARK, True)
    setattr(target, name, wrapped)


def _record_state_entries() -> None:
    """Snapshot the input and variables of every top-level state as it is entered."""
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def entered(self: Any, env: Any) -> None:
            if not env.is_frame():
                store = env.variable_store
                env._saga_entered = EnteredState(
                    name=self.name,
                    input=env.states.get_input(),
                    variables=copy.deepcopy({**store._outer_scope, **store._inner_scope}),
                )
            original(self, env)

        return entered

    _once(CommonStateField, "_eval_body", wrap)


def _count_redrives_in_context() -> None:
    """`$states.context.Execution.RedriveCount` is 0 in an execution never redriven."""
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def environment(self: Any) -> Any:
            env = original(self)
            env.states.context_object.context_object_data["Execution"]["RedriveCount"] = 0
            return env

        return environment

    _once(ExecutionWorker, "_get_evaluation_environment", wrap)


def _dates_on_local_clock() -> None:
    """startDate and stopDate come from the local AWS's clock, as the redrive window does."""
    from moto.stepfunctions.parser.backend.execution import (
        BaseExecutionWorkerCommunication,
        Execution,
    )

    def wrap_start(original: Any) -> Any:
        @functools.wraps(original)
        def start(self: Any) -> None:
            self.start_date = _now()  # before the worker reads it into the context object
            original(self)

        return start

    def wrap_terminated(original: Any) -> Any:
        @functools.wraps(original)
        def terminated(self: Any) -> None:
            original(self)
            self.execution.stop_date = _now()

        return terminated

    _once(Execution, "start", wrap_start)
    _once(BaseExecutionWorkerCommunication, "terminated", wrap_terminated)


def _stop_is_final() -> None:
    """A stopped execution ends ABORTED, as StopExecution does on AWS. moto let a task failing
    after the stop (its Retry and Catch are skipped once stopped) turn it into FAILED."""
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def unless_stopped(self: Any, *args: Any, **kwargs: Any) -> None:
            if not isinstance(self._program_state, ProgramStopped):
                original(self, *args, **kwargs)

        return unless_stopped

    _once(Environment, "set_error", wrap)
    _once(Environment, "set_timed_out", wrap)


def _serve_the_api() -> None:
    """RedriveExecution, and the redrive fields of DescribeExecution and ListExecutions."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.responses import StepFunctionResponse

    if getattr(StepFunctionResponse, _MARK, False):
        return

    def redrive_execution(self: Any) -> Any:
        arn = self._get_param("executionArn")
        token = self._get_param("clientToken")
        date = redrive(self.stepfunction_backend, arn, token)
        return ActionResult({"redriveDate": date})

    original_describe = StepFunctionResponse.describe_execution

    def describe_execution(self: Any) -> Any:
        execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
        if not hasattr(execution, "exec_worker"):  # moto without the interpreter
            return original_describe(self)
        return ActionResult(execution_description(execution))

    def list_executions(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        state_machine = self.stepfunction_backend.describe_state_machine(arn)
        items = _listed_executions(
            state_machine, self._get_param("statusFilter"), self._get_param("redriveFilter")
        )
        page, next_token = _page(
            items, self._get_int_param("maxResults"), self._get_param("nextToken")
        )
        result: dict[str, Any] = {"executions": page}
        if next_token is not None:
            result["nextToken"] = next_token
        return ActionResult(result)

    StepFunctionResponse.redrive_execution = redrive_execution  # type: ignore[attr-defined]
    StepFunctionResponse.describe_execution = describe_execution  # type: ignore[method-assign]
    StepFunctionResponse.list_executions = list_executions  # type: ignore[method-assign]
    setattr(StepFunctionResponse, _MARK, True)


def _listed_executions(
    state_machine: Any, status_filter: str | None, redrive_filter: str | None
) -> list[dict[str, Any]]:
    """ListExecutions' items, newest first, with the redrive fields AWS adds."""
    items = []
    for execution in sorted(state_machine.executions, key=lambda e: e.start_date, reverse=True):
        record = record_of(execution)
        if status_filter and execution.status != status_filter:
            continue
        if redrive_filter == "REDRIVEN" and record.count == 0:
            continue
        if redrive_filter == "NOT_REDRIVEN" and record.count > 0:
            continue
        item: dict[str, Any] = {
            "executionArn": execution.execution_arn,
            "stateMachineArn": state_machine.arn,
            "name": execution.name,
            "status": execution.status,
            "startDate": execution.start_date,
            "redriveCount": record.count,
        }
        if execution.status != "RUNNING" and execution.stop_date is not None:
            item["stopDate"] = execution.stop_date
        if record.date is not None:
            item["redriveDate"] = record.date
        items.append(item)
    return items


def _page(
    items: list[dict[str, Any]], max_results: int | None, token: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    start = int(token) if token and token.isdigit() else 0
    size = max_results or 100
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def install_redrive() -> None:
    """RedriveExecution and its bookkeeping in this process's moto (idempotent)."""
    with _LOCK:
        _record_state_entries()
        _count_redrives_in_context()
        _dates_on_local_clock()
        _stop_is_final()
        _serve_the_api()


# --- RedriveExecution ----------------------------------------------------------------------------


def _not_redrivable(message: str) -> Exception:
    from moto.core.exceptions import AWSError

    return AWSError(message, exception_type="ExecutionNotRedrivable")


def redrive(backend: Any, execution_arn: str, client_token: str | None) -> datetime.datetime:
    """Redrive one execution (the API call); returns its redriveDate."""
    from moto.stepfunctions.parser.backend.execution import Execution

    # InvalidArn / ExecutionDoesNotExist come from moto itself, as for DescribeExecution.
    execution = backend.describe_execution(execution_arn)
    with _LOCK:
        now = _now()
        record = record_of(execution)
        replayed = record.answered(client_token, now)
        if replayed is not None:
            return replayed
        if not isinstance(execution, Execution) or execution.exec_worker is None:
            raise _not_redrivable("this execution was not run by the local interpreter")
        if getattr(execution.state_machine, "type", "STANDARD") != "STANDARD":
            raise _not_redrivable("RedriveExecution is not supported for EXPRESS state machines")
        status, reason = redrive_status(execution, now)
        if status == NOT_REDRIVABLE:
            raise _not_redrivable(str(reason))
        record.count += 1
        record.date = now
        record.remember(client_token, now)
        _resume(execution, redrive_count=record.count, redrive_time=now)
        return now


@functools.cache
def _redrive_worker_class() -> type:
    from moto.stepfunctions.parser.api import HistoryEventType
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.eval.event.event_manager import EventHistoryContext
    from moto.stepfunctions.parser.asl.eval.variable_store import VariableStore
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.utils import TMP_THREADS

    class RedriveWorker(ExecutionWorker):
        """Runs an execution again from the state it stopped in, continuing its history."""

        def __init__(
            self, previous: Any, entered: EnteredState | None, count: int, time: datetime.datetime
        ) -> None:
            super().__init__(
                evaluation_details=previous._evaluation_details,
                exec_comm=previous._execution_communication,
                cloud_watch_logging_session=previous._cloud_watch_logging_session,
                activity_store=previous._activity_store,
                mock_test_case=previous._mock_test_case,
            )
            self._entered = entered
            old_env = previous.env
            env: Any = self._get_evaluation_environment()
            context = env.states.context_object.context_object_data["Execution"]
            context["RedriveCount"] = count
            context["RedriveTime"] = time.isoformat()
            # One history: the new events follow the old ones, numbered on.
            env.event_manager = old_env.event_manager
            last_id = len(old_env.event_manager.get_event_history())
            env.event_history_context = EventHistoryContext(previous_event_id=last_id)
            if entered is not None:
                env.states.reset(input_value=copy.deepcopy(entered.input))
                store: Any = VariableStore()  # type: ignore[no-untyped-call]
                store._inner_scope.update(copy.deepcopy(entered.variables))
                env.variable_store = store
            self._count = count
            # Built now, not in the thread: the history stays readable throughout.
            self.env = env

        def _execution_logic(self) -> None:
            program: Any = self._get_evaluation_entrypoint()
            env: Any = self.env
            env.event_manager.add_event(
                context=env.event_history_context,
                event_type=HistoryEventType.ExecutionRedriven,
                event_details={"executionRedrivenEventDetails": {"redriveCount": self._count}},
            )
            start = self._entered.name if self._entered else program.start_at.start_at_name
            # Program.eval, from `start` instead of StartAt; its TimeoutSeconds starts again.
            timeout = program.timeout_seconds.timeout_seconds if program.timeout_seconds else None
            env.next_state_name = start
            worker = threading.Thread(target=EvalComponent.eval, args=(program, env), daemon=True)
            TMP_THREADS.append(worker)
            worker.start()
            worker.join(timeout=timeout)
            if worker.is_alive():
                env.set_timed_out()
            self._execution_communication.terminated()

    return RedriveWorker


def _resume(execution: Any, *, redrive_count: int, redrive_time: datetime.datetime) -> None:
    """Put the execution back to RUNNING under a worker that continues it."""
    from moto.stepfunctions.parser.api import ExecutionStatus

    previous = execution.exec_worker
    entered: EnteredState | None = getattr(previous.env, "_saga_entered", None)
    worker = _redrive_worker_class()(previous, entered, redrive_count, redrive_time)
    execution.exec_worker = worker
    execution.exec_status = ExecutionStatus.RUNNING
    execution.stop_date = None
    execution.error = None
    execution.cause = None
    execution.output = None
    worker.start()
