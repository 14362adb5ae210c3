"""A Task whose wait ended (timed out, its execution stopped) before it was scheduled is not
scheduled (local_aws.task_timeouts). moto prunes every evaluation in an ended frame, so its
TimeoutSeconds was never pushed and TaskScheduled took the state input off the stack as
`timeoutInSeconds`: GetExecutionHistory then failed with a 500 (`int()` of a dict in moto's
serializer), and the Lambda was invoked all the same. Driven on moto's interpreter objects
directly: no local AWS server."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from moto.core.serialize import JSONSerializer
from moto.core.utils import get_service_model
from moto.stepfunctions.parser.api import StateMachineType
from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import EvalTimeoutError
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.evaluation_details import AWSExecutionDetails
from moto.stepfunctions.parser.asl.eval.event.event_manager import EventHistoryContext
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

from local_aws.task_timeouts import TaskNotScheduled, install_task_timeouts

ACCOUNT = "123456789012"
FUNCTION_ARN = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:tool"
STATE_INPUT = {"case_id": "c-1"}
DEFINITION = {
    "QueryLanguage": "JSONata",
    "StartAt": "Tool",
    "States": {
        "Tool": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "TimeoutSeconds": 25,
            "Arguments": {
                "FunctionName": FUNCTION_ARN,
                "Payload": {"step": "release"},
            },
            "End": True,
        }
    },
}


def _task_state() -> Any:
    install_task_timeouts()
    program: Any = AmazonStateLanguageParser.parse(json.dumps(DEFINITION))[0]
    return program.states.states["Tool"]


def _execution_env() -> Any:
    """The execution's environment as the Task finds it: its input on the stack."""
    # Execution and StateMachine only, as moto builds a frame's (ContextObjectData's others
    # are filled in as states are entered).
    context: Any = {
        "Execution": {"Id": "arn:exec", "Input": {}, "Name": "e", "RoleArn": "r", "StartTime": ""},
        "StateMachine": {"Id": "arn:sm", "Name": "sm"},
    }
    env: Any = Environment(
        aws_execution_details=AWSExecutionDetails(
            account=ACCOUNT, region="us-east-1", role_arn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
        ),
        execution_type=StateMachineType.STANDARD,
        context=context,
        event_history_context=EventHistoryContext.of_program_start(),
        cloud_watch_logging_session=None,
        activity_store={},
    )
    env.next_state_name = "Tool"
    env.states.reset(input_value=copy.deepcopy(STATE_INPUT))
    env.stack.append(env.states.get_input())
    return env


def _task_frame(env: Any) -> Any:
    """The frame moto's `_evaluate_with_timeout` runs the task in."""
    frame = env.open_frame()
    frame.states.reset(input_value=env.states.get_input())
    frame.stack = copy.deepcopy(env.stack)
    return frame


def _invocations_of(state: Any) -> list[dict[str, Any]]:
    """Stand in for the Lambda invocation: record it, answer as Lambda does."""
    invoked: list[dict[str, Any]] = []

    def invoke(*, env: Any, normalised_parameters: dict[str, Any], **_: Any) -> None:
        invoked.append(normalised_parameters)
        env.stack.append({"Payload": {}, "StatusCode": 200})

    state._eval_service_task = invoke
    return invoked


def _history(env: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = env.event_manager.get_event_history()
    return events


def _serialized_history(events: list[dict[str, Any]]) -> dict[str, Any]:
    """GetExecutionHistory's answer as moto's server serializes it."""
    operation = get_service_model("stepfunctions").operation_model("GetExecutionHistory")
    body: dict[str, Any] = json.loads(
        JSONSerializer(operation).serialize({"events": events})["body"]
    )
    return body


def test_a_task_whose_wait_ended_while_its_arguments_were_evaluated_is_not_scheduled() -> None:
    state, env = _task_state(), _execution_env()
    frame = _task_frame(env)
    invoked = _invocations_of(state)
    evaluate_arguments = state.parargs.eval

    def arguments_then_timeout(env: Any) -> None:
        evaluate_arguments(env)
        frame.set_ended()  # what the waiting thread does when the task times out meanwhile

    state.parargs.eval = arguments_then_timeout
    raised: Exception | None = None
    try:
        state._eval_execution(frame)
    except TaskNotScheduled as error:
        raised = error
    assert _history(env) == []  # no TaskScheduled with the state input as its timeout
    assert invoked == []  # and no delivery the execution no longer waits for
    assert isinstance(raised, TaskNotScheduled)


def test_a_task_still_awaited_is_scheduled_with_its_timeout() -> None:
    state, env = _task_state(), _execution_env()
    invoked = _invocations_of(state)
    state._eval_execution(_task_frame(env))
    events = _serialized_history(_history(env))["events"]
    assert [event["type"] for event in events] == ["TaskScheduled", "TaskStarted", "TaskSucceeded"]
    assert events[0]["taskScheduledEventDetails"]["timeoutInSeconds"] == 25
    assert [call["FunctionName"] for call in invoked] == [FUNCTION_ARN]


def test_a_task_not_scheduled_because_it_timed_out_fails_as_timed_out() -> None:
    state, env = _task_state(), _execution_env()

    def ended_before_scheduling(frame: Any) -> None:
        raise TaskNotScheduled("Tool")

    state._eval_execution = ended_before_scheduling
    with pytest.raises(EvalTimeoutError):
        state._evaluate_with_timeout(env)


def test_a_task_not_scheduled_because_its_execution_stopped_ends_without_an_event() -> None:
    state, env = _task_state(), _execution_env()

    def stopped_before_scheduling(frame: Any) -> None:
        env.set_stop(stop_date=None, cause="stopped", error=None)
        raise TaskNotScheduled("Tool")

    state._eval_execution = stopped_before_scheduling
    assert state._evaluate_with_timeout(env) is None
    assert _history(env) == []
