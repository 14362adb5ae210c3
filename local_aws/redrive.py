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
  open for more than a year or with 24,999 history events or more (a redrive needs room for
  two more under the 25,000 limit); it answers idempotently for the last 10 `clientToken`s,
  each for 15 minutes after its first use.

Times (close, redrive, the 14-day window) are read from `saga.clock.now()`: the one clock of the
local AWS process, which the emulator may move.

Locally, a failed Map or Parallel state reruns whole (Step Functions reruns only the failed
iterations or branches); the saga's state machine has neither. A redriven execution is RUNNING at
once (Step Functions may show it PENDING_REDRIVE first, its `redriveCount` not yet raised). Two
`redriveStatusReason`s cannot arise here: "State machine is in DELETING status" (moto deletes a
state machine and its executions at once: a redrive then finds no execution) and "Execution was
started before the launch of RedriveExecution" (November 2023).
"""

from __future__ import annotations

import copy
import datetime
import functools
import threading
from typing import Any

from local_aws.patching import wrap_once
from local_aws.redrive_state import (
    NOT_REDRIVABLE,
    EnteredState,
    execution_description,
    local_now,
    record_of,
    redrive_status,
)

_MARK = "_saga_redrive_hook"
_LOCK = threading.RLock()


# --- the hooks into moto's interpreter -----------------------------------------------------------


def _record_state_entries() -> None:
    """Snapshot the input and variables of every top-level state as it is entered."""
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    def wrap(original: Any) -> Any:
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

    wrap_once(CommonStateField, "_eval_body", _MARK, wrap)


def _count_redrives_in_context() -> None:
    """`$states.context.Execution.RedriveCount` is 0 in an execution never redriven."""
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    def wrap(original: Any) -> Any:
        def environment(self: Any) -> Any:
            env = original(self)
            env.states.context_object.context_object_data["Execution"]["RedriveCount"] = 0
            return env

        return environment

    wrap_once(ExecutionWorker, "_get_evaluation_environment", _MARK, wrap)


def _dates_on_local_clock() -> None:
    """startDate and stopDate come from the local AWS's clock, as the redrive window does."""
    from moto.stepfunctions.parser.backend.execution import (
        BaseExecutionWorkerCommunication,
        Execution,
    )

    def wrap_start(original: Any) -> Any:
        def start(self: Any) -> None:
            self.start_date = local_now()  # before the worker reads it into the context object
            original(self)

        return start

    def wrap_terminated(original: Any) -> Any:
        def terminated(self: Any) -> None:
            original(self)
            self.execution.stop_date = local_now()

        return terminated

    wrap_once(Execution, "start", _MARK, wrap_start)
    wrap_once(BaseExecutionWorkerCommunication, "terminated", _MARK, wrap_terminated)


def _stop_is_final() -> None:
    """A stopped execution ends ABORTED, as StopExecution does on AWS. moto let a task failing
    after the stop (its Retry and Catch are skipped once stopped) turn it into FAILED."""
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    def wrap(original: Any) -> Any:
        def unless_stopped(self: Any, *args: Any, **kwargs: Any) -> None:
            if not isinstance(self._program_state, ProgramStopped):
                original(self, *args, **kwargs)

        return unless_stopped

    wrap_once(Environment, "set_error", _MARK, wrap)
    wrap_once(Environment, "set_timed_out", _MARK, wrap)


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
        now = local_now()
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
