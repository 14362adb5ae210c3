"""The local AWS's EventBridge pieces that need no server: input transformation, rate
expressions, and the RedriveExecution client-token memory."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from local_aws.event_rules import (
    MISSING,
    json_path_value,
    render_input_transformer,
    render_target_input,
)
from local_aws.redrive_state import CLIENT_TOKEN_MEMORY, CLIENT_TOKEN_SECONDS, RedriveRecord
from local_aws.schedules import rate_seconds

RULE_ARN = "arn:aws:events:us-east-1:123456789012:rule/r"
CAUSE = '{"errorType":"TransientError","errorMessage":"inventory said \\"no\\"\\n"}'
# The failed-execution rule's transformer, as CDK synthesizes it (stacks/constructs/escalation.py).
ESCALATION_TRANSFORMER = {
    "InputPathsMap": {
        "detail-status": "$.detail.status",
        "detail-name": "$.detail.name",
        "detail-executionArn": "$.detail.executionArn",
        "detail-error": "$.detail.error",
        "detail-cause": "$.detail.cause",
        "time": "$.time",
    },
    "InputTemplate": '{"kind":"EXECUTION_NOT_SUCCEEDED","status":<detail-status>,'
    '"case_id":<detail-name>,"execution":<detail-executionArn>,"error":<detail-error>,'
    '"cause":<detail-cause>,"time":<time>}',
}


def event(**detail: Any) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "id-1",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": "123456789012",
        "time": "2026-11-29T19:17:22Z",
        "region": "us-east-1",
        "resources": ["arn:exec"],
        "detail": {"status": "FAILED", "name": "case-1", "executionArn": "arn:exec", **detail},
    }


def test_unquoted_placeholders_take_json_values_so_a_cause_with_quotes_stays_valid() -> None:
    text = render_input_transformer(
        ESCALATION_TRANSFORMER, event(error="TransientError", cause=CAUSE), RULE_ARN, "r"
    )

    assert json.loads(text) == {
        "kind": "EXECUTION_NOT_SUCCEEDED",
        "status": "FAILED",
        "case_id": "case-1",
        "execution": "arn:exec",
        "error": "TransientError",
        "cause": CAUSE,
        "time": "2026-11-29T19:17:22Z",
    }


def test_a_null_value_is_null_and_a_missing_path_creates_no_variable() -> None:
    nulls = render_input_transformer(
        ESCALATION_TRANSFORMER, event(error=None, cause=None), RULE_ARN, "r"
    )
    assert json.loads(nulls)["error"] is None and json.loads(nulls)["cause"] is None

    missing = render_input_transformer(
        {"InputPathsMap": {"x": "$.detail.nothing"}, "InputTemplate": '{"x": "<x>", "y": 1}'},
        event(),
        RULE_ARN,
        "r",
    )
    assert missing == '{"x": "", "y": 1}'


def test_inside_a_string_values_are_pasted_unescaped_and_objects_lose_their_quotes() -> None:
    transformer = {
        "InputPathsMap": {"name": "$.detail.name", "detail": "$.detail"},
        "InputTemplate": '"case <name> in <aws.events.rule-name>: <detail>" ',
    }

    text = render_input_transformer(transformer, event(), RULE_ARN, "my-rule")

    assert text == '"case case-1 in my-rule: {status:FAILED,name:case-1,executionArn:arn:exec}" '


def test_predefined_variables_and_a_plain_text_template() -> None:
    transformer = {
        "InputPathsMap": {"first": "$.resources[0]"},
        "InputTemplate": "<aws.events.rule-arn> saw <first> (<unknown>)",
    }

    text = render_input_transformer(transformer, event(), RULE_ARN, "r")

    assert text == f"{RULE_ARN} saw arn:exec (<unknown>)"
    whole = render_input_transformer(
        {"InputTemplate": '{"e": <aws.events.event.json>}'}, event(), RULE_ARN, "r"
    )
    assert json.loads(whole) == {"e": event()}


def test_input_and_input_path_and_the_default_whole_event() -> None:
    assert render_target_input({"Input": '{"fixed":1}'}, event(), RULE_ARN, "r") == '{"fixed":1}'
    assert (
        json.loads(render_target_input({"InputPath": "$.detail"}, event(), RULE_ARN, "r"))
        == (event()["detail"])
    )
    assert json.loads(render_target_input({}, event(), RULE_ARN, "r")) == event()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", event()),
        ("$.detail.name", "case-1"),
        ("$.detail-type", "Step Functions Execution Status Change"),
        ("$.resources[0]", "arn:exec"),
        ("$.resources[1]", MISSING),
        ("$.detail.none", MISSING),
        ("detail.name", MISSING),
    ],
)
def test_json_paths(path: str, expected: Any) -> None:
    assert json_path_value(event(), path) == expected


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("rate(5 minutes)", 300),
        ("rate(1 minute)", 60),
        ("rate(2 hours)", 7200),
        ("rate(1 day)", 86400),
        ("rate(1 minutes)", None),
        ("rate(5 minute)", None),
        ("rate(0 minutes)", None),
        ("cron(0 12 * * ? *)", None),
    ],
)
def test_rate_expressions(expression: str, seconds: int | None) -> None:
    assert rate_seconds(expression) == seconds


def test_a_client_token_answers_for_15_minutes_and_only_the_last_ten_are_kept() -> None:
    record = RedriveRecord()
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    record.remember("t0", start)
    assert record.answered("t0", start + dt.timedelta(seconds=CLIENT_TOKEN_SECONDS)) == start
    assert record.answered("t0", start + dt.timedelta(seconds=CLIENT_TOKEN_SECONDS + 1)) is None
    assert record.answered(None, start) is None

    for index in range(1, CLIENT_TOKEN_MEMORY + 1):
        record.remember(f"t{index}", start)

    assert record.answered("t0", start) is None  # the eleventh pushed the first out
    assert record.answered(f"t{CLIENT_TOKEN_MEMORY}", start) == start
