"""Injection of Retry/TimeoutSeconds into any ASL, including nested states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks.config import SagaConfig
from stacks.workflow_policy import DefinitionError, iter_states, render_definition, task_target

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


@pytest.fixture(scope="module")
def config() -> SagaConfig:
    return SagaConfig.from_mapping(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"])


def _lambda_task(placeholder: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Arguments": {"FunctionName": "${" + placeholder + "}", "Payload": "{% $states.input %}"},
        **extra,
    }


def _definition() -> dict[str, Any]:
    return {
        "QueryLanguage": "JSONata",
        "StartAt": "Fan",
        "States": {
            "Fan": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Release",
                        "States": {
                            "Release": _lambda_task("ReleaseReservationFunctionArn", End=True)
                        },
                    }
                ],
                "Next": "Notify",
            },
            "Notify": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Arguments": {"QueueUrl": "${EscalationQueueUrl}", "MessageBody": "x"},
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    }


def test_nested_and_service_tasks_get_their_class_policy_and_timeout(config: SagaConfig) -> None:
    original = _definition()
    rendered = render_definition(original, config)
    states = dict(iter_states(rendered))
    release = states["Release"]
    assert [r["ErrorEquals"] for r in release["Retry"]] == [
        list(config.retry["compensation"].error_equals),
        ["ActionPending"],
    ]
    assert release["TimeoutSeconds"] == config.workflow.lambda_task_timeout_seconds
    notify = states["Notify"]
    # A service task has no class of its own (the saga has none since Escalate is a Lambda
    # task): the default class, and no ActionPending retrier (only a tool raises it).
    assert notify["Retry"] == [config.retry["tool"].to_retrier()]
    assert notify["TimeoutSeconds"] == config.workflow.service_task_timeout_seconds
    assert rendered["TimeoutSeconds"] == config.workflow.execution_timeout_minutes * 60
    assert "Retry" not in dict(iter_states(original))["Release"], "the input is not mutated"


@pytest.mark.parametrize("field", ["Retry", "TimeoutSeconds", "HeartbeatSeconds"])
def test_a_task_that_declares_its_own_policy_is_rejected(config: SagaConfig, field: str) -> None:
    definition = _definition()
    definition["States"]["Notify"][field] = [] if field == "Retry" else 5
    with pytest.raises(DefinitionError, match=f"Task 'Notify' declares {field}"):
        render_definition(definition, config)


def test_a_definition_without_tasks_is_rejected(config: SagaConfig) -> None:
    with pytest.raises(DefinitionError, match="no Task state"):
        render_definition({"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}, config)


def test_task_target_is_the_whole_placeholder_argument() -> None:
    assert task_target(_lambda_task("X")) == "X"
    assert task_target({"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage"}) is None


def test_a_catch_names_the_crash_family_whole_never_one_of_its_names(config: SagaConfig) -> None:
    definition = _definition()
    definition["States"]["Fan"]["Catch"] = [
        {"ErrorEquals": ["OutcomeUnknown", "@LambdaCrash"], "Next": "Done"}
    ]
    rendered = dict(iter_states(render_definition(definition, config)))
    assert rendered["Fan"]["Catch"][0]["ErrorEquals"] == [
        "OutcomeUnknown",
        "Sandbox.Timedout",
        "Runtime.ExitError",
        "Runtime.OutOfMemory",
        "Lambda.Unknown",
    ]

    definition["States"]["Fan"]["Catch"] = [
        {"ErrorEquals": ["OutcomeUnknown", "Lambda.Unknown"], "Next": "Done"}
    ]
    with pytest.raises(
        DefinitionError, match=r"State 'Fan' Catch #1 names Lambda\.Unknown itself: name the whole"
    ):
        render_definition(definition, config)
