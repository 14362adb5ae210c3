"""A Task state's timeout, fired on demand (a delivery that hangs past it), and a stopped
execution that does not wait for its task.

Step Functions gives up on a Task after its `TimeoutSeconds` (States.Timeout) while the Lambda
invocation it started goes on: the function runs until it ends or its own timeout kills it.
moto's executor waits for the task's result in the execution's thread (`terminated_event.wait(
timeout_seconds)` in `ExecutionState._evaluate_with_timeout`) while the invoke goes on in a
thread of its own, so it already lets the invocation outlive the task. `time_out_task` makes a
waiting task's timeout fire now instead of after its `TimeoutSeconds` of real time, so a fault
campaign can have a delivery hang past its task's timeout without waiting 25 seconds (it moves
the local clock by the timeout itself, as real time would have passed).

StopExecution ends an execution at once on AWS (ABORTED, its stop date), whatever its running
task does: the Lambda invocation goes on alone, and its result is dropped. moto's stop only
marks the execution, which then stays RUNNING until the task's invocation answers; here the
task stops waiting when its execution is stopped, adding no event, so the execution is ABORTED
at once (and can be redriven) while the invocation runs on.

A task whose wait ends (timed out, stopped) before it is scheduled is not scheduled: moto's
pruned evaluation would leave its TimeoutSeconds unpushed, so TaskScheduled would take the state
input off the stack as `timeoutInSeconds` (a history GetExecutionHistory then answers with a
500), and the Lambda would still be invoked: a delivery Step Functions never makes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from local_aws.patching import wrap_once

_MARK = "_saga_task_timeouts"
_CURRENT = threading.local()  # the task the execution thread waits for: (execution, state)
_WAITING: dict[tuple[str, str], _TaskWait] = {}
_LOCK = threading.Lock()


class _TaskWait(threading.Event):
    """moto's `terminated_event` for one Task: its wait also ends when the task is timed out."""

    def __init__(self, task: tuple[str, str] | None) -> None:
        super().__init__()
        self.task = task
        self.timeout_seconds: float | None = None
        self.expired = False
        self.abandoned = False  # its execution was stopped

    def wait(self, timeout: float | None = None) -> bool:
        if self.task is None or timeout is None:
            return super().wait(timeout)
        self.timeout_seconds = timeout
        with _LOCK:
            _WAITING[self.task] = self
        deadline = time.monotonic() + timeout
        try:
            with self._cond:  # type: ignore[attr-defined]  # threading.Event's own condition
                while not self._flag and not self.expired:  # type: ignore[attr-defined]
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)  # type: ignore[attr-defined]
                return bool(self._flag) and not self.expired  # type: ignore[attr-defined]
        finally:
            with _LOCK:
                if _WAITING.get(self.task) is self:
                    del _WAITING[self.task]

    def expire(self, *, abandoned: bool = False) -> None:
        with self._cond:  # type: ignore[attr-defined]
            self.expired = True
            self.abandoned = abandoned
            self._cond.notify_all()  # type: ignore[attr-defined]


class TaskNotScheduled(Exception):
    """The task's wait ended (timed out, its execution stopped) before it was scheduled."""


def _scheduled_while_awaited(original: Any) -> Any:
    """TaskScheduled (and the invocation after it) only while the task is still waited for.

    Checked under the frame's state lock, which ending the frame takes too: the task's
    TimeoutSeconds cannot be pruned between the check and the event that records it."""

    def before_eval_execution(self: Any, env: Any, *args: Any, **kwargs: Any) -> None:
        with env._state_mutex:
            if not env.is_running():
                raise TaskNotScheduled(str(getattr(self, "name", "")))
            original(self, env, *args, **kwargs)

    return before_eval_execution


class _ThreadingInExecuteState:
    """Stands in for `threading` in moto's execute_state module: its Event knows its task."""

    def Event(self) -> _TaskWait:  # threading's name
        wait = _TaskWait(getattr(_CURRENT, "task", None))
        _CURRENT.wait = wait
        return wait

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


def _task_of(env: Any) -> tuple[str, str] | None:
    try:
        context = env.states.context_object.context_object_data
        return str(context["Execution"]["Id"]), str(context["State"]["Name"])
    except (AttributeError, KeyError, TypeError):
        return None


def install_task_timeouts() -> None:
    """Let `time_out_task` fire a waiting task's timeout (idempotent; inert until used)."""
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import EvalTimeoutError
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service,
    )
    from moto.stepfunctions.parser.backend.execution import Execution

    execute_state.threading = _ThreadingInExecuteState()  # type: ignore[attr-defined,assignment]

    def wrap(original: Any) -> Any:
        def evaluate_with_timeout(self: Any, env: Any) -> Any:
            _CURRENT.task, _CURRENT.wait = _task_of(env), None
            try:
                return original(self, env)
            except EvalTimeoutError:
                wait = getattr(_CURRENT, "wait", None)
                if wait is not None and wait.abandoned:
                    return None  # stopped: the state ends with the execution, no event
                raise
            except TaskNotScheduled:
                if not env.is_running():
                    return None  # stopped before the task was scheduled: no event either
                raise EvalTimeoutError() from None  # its wait timed out first
            finally:
                _CURRENT.task = _CURRENT.wait = None

        return evaluate_with_timeout

    def wrap_stop(original: Any) -> Any:
        def stop(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            _abandon_tasks(str(self.exec_arn))
            return result

        return stop

    wrap_once(execute_state.ExecutionState, "_evaluate_with_timeout", _MARK, wrap)
    service_task = state_task_service.StateTaskService
    wrap_once(service_task, "_before_eval_execution", _MARK, _scheduled_while_awaited)
    wrap_once(Execution, "stop", _MARK, wrap_stop)


def _abandon_tasks(execution_arn: str) -> None:
    with _LOCK:
        waiting = [wait for (arn, _), wait in _WAITING.items() if arn == execution_arn]
    for wait in waiting:
        wait.expire(abandoned=True)


def waiting_timeout(execution_arn: str, state_name: str) -> float | None:
    """The TimeoutSeconds of the Task `state_name` of the execution while it waits for its
    result, else None."""
    with _LOCK:
        waiting = _WAITING.get((execution_arn, state_name))
    return None if waiting is None else waiting.timeout_seconds


def time_out_task(execution_arn: str, state_name: str) -> float | None:
    """Fire the timeout of the Task `state_name` of the execution now (States.Timeout, its
    invocation left running); its TimeoutSeconds, or None when no such task is waiting."""
    with _LOCK:
        waiting = _WAITING.get((execution_arn, state_name))
    if waiting is None:
        return None
    waiting.expire()
    return waiting.timeout_seconds
