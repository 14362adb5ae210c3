"""SagaConfig: cdk.json parses into typed values; bad values fail with the key's name."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from saga.ledger import LedgerPolicy
from saga.sandbox.payment_keys import PAYMENT_KEY_RETENTION_SECONDS
from saga.tools.sweeper import DEFAULT_GRACE_SECONDS
from stacks.config import ConfigError, SagaConfig, reject_dotted_overrides
from stacks.config_sections import FunctionsConfig
from tests.infra.conftest import four_eyes_own_principals

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


def _context() -> dict[str, Any]:
    return dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"])


def _with(path: str, value: Any) -> dict[str, Any]:
    context = copy.deepcopy(_context())
    *parents, leaf = path.split(".")
    node = context
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return context


_DELETE = object()


def test_cdk_json_context_parses_into_typed_values() -> None:
    raw = _context()
    config = SagaConfig.from_mapping(raw)
    assert config.stage == "dev"
    assert config.stack_name == "ReplacementOrderSaga-dev"
    assert config.sandbox is True
    assert config.retain_data is False
    assert dict(config.tenants) == {
        "acme": ("supervisor@acme",),
        "globex": ("ops@globex",),
        "hooli": ("controller@hooli", "cfo@hooli"),
    }
    # Four eyes for hooli only: acme's and globex's cases need one approver, as ever.
    assert config.approval_thresholds == {
        "hooli": {"USD": 100_000, "EUR": 100_000, "GBP": 80_000, "JPY": 150_000}
    }
    assert config.ledger.retention_seconds == raw["ledger"]["retention_days"] * 86400
    assert config.ledger.attempt_budget == raw["ledger"]["attempt_budget"]
    assert config.retry["compensation"].max_attempts == raw["retry"]["compensation"]["MaxAttempts"]
    assert set(config.retry) >= {"tool", "pending", "compensation", "reconcile"}
    assert config.pending_policy.error_equals == ("ActionPending",)
    assert json.loads(config.tenants_json) == {
        "acme": ["supervisor@acme"],
        "globex": ["ops@globex"],
        "hooli": ["cfo@hooli", "controller@hooli"],
    }


def test_retry_class_is_chosen_by_state_name_then_target_then_default() -> None:
    context = _with("task_retry_class.ReserveStock", "reconcile")
    config = SagaConfig.from_mapping(context)
    assert config.retry_class_for("ReserveStock", "ReserveStockFunctionArn").name == "reconcile"
    assert (
        config.retry_class_for("Anything", "ReleaseReservationFunctionArn").name == "compensation"
    )
    assert config.retry_class_for("Anything", None).name == "tool"


def test_retrier_has_all_six_fields_with_full_jitter() -> None:
    retrier = SagaConfig.from_mapping(_context()).retry["tool"].to_retrier()
    assert retrier == {
        "ErrorEquals": [
            "TransientError",
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException",
            "Lambda.TooManyRequestsException",
            "Lambda.ClientExecutionTimeoutException",
        ],
        "IntervalSeconds": 1,
        "MaxAttempts": 3,
        "BackoffRate": 2.0,
        "MaxDelaySeconds": 8,
        "JitterStrategy": "FULL",
    }


def test_a_policy_names_the_crash_family_and_retries_each_of_its_names() -> None:
    compensation = SagaConfig.from_mapping(_context()).retry["compensation"]
    assert compensation.to_retrier()["ErrorEquals"][:7] == [
        "TransientError",
        "OutcomeUnknown",
        "States.Timeout",
        "Sandbox.Timedout",
        "Runtime.ExitError",
        "Runtime.OutOfMemory",
        "Lambda.Unknown",
    ]


def test_cli_string_values_are_accepted() -> None:
    context = _with("sandbox", "false")
    context["stage"] = "prod"
    # A section as the CLI gives it (a JSON string); outside the sandbox four eyes needs it.
    context["approval_keys"] = json.dumps(four_eyes_own_principals())
    context["payment_key_retention_hours"] = "48"
    config = SagaConfig.from_mapping(context)
    assert (config.sandbox, config.retain_data, config.payment_key_retention_hours) == (
        False,
        True,
        48,
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("stage", "Prod_1", "context 'stage' must match"),
        ("sandbox", "maybe", "context 'sandbox' must be true or false"),
        ("ledger.attempt_budget", 0, "context 'ledger.attempt_budget' must be a positive integer"),
        ("ledger", _DELETE, "context 'ledger' must be an object"),
        ("tenants", {}, "context 'tenants' must be a non-empty object"),
        ("tenants", {"a#b": ["x"]}, "without '#'"),
        ("functions.log_retention_days", 31, "CloudWatch's values"),
        ("retry.tool.MaxAttempts", -1, "context 'retry.tool.MaxAttempts' must be an integer"),
        ("retry.tool.BackoffRate", 0.5, "context 'retry.tool.BackoffRate' must be a number >= 1.0"),
        ("retry.tool.MaxDelaySeconds", _DELETE, "'retry.tool.MaxDelaySeconds' must be a positive"),
        ("retry.tool.JitterStrategy", "NONE", "unknown fields ['JitterStrategy']"),
        ("retry.tool.ErrorEquals", ["States.ALL"], "must not use States.ALL"),
        ("retry.tool.ErrorEquals", ["ActionPending"], "retried by the 'pending' policy"),
        (
            "retry.compensation.ErrorEquals",
            ["TransientError", "Lambda.Unknown"],
            "'retry.compensation.ErrorEquals' names Lambda.Unknown itself: name the whole family "
            "of a function that died as '@LambdaCrash'",
        ),
        ("retry.pending", _DELETE, "must define the 'pending' policy"),
        ("task_retry_class.default", _DELETE, "with a 'default' entry"),
        ("task_retry_class.Escalate", "nope", "'task_retry_class.Escalate' names unknown"),
        ("workflow.lambda_task_timeout_seconds", 30, "must be shorter than"),
        ("downstream_timeout_seconds", 45, "must fit inside 'functions.timeout_seconds'"),
        ("ledger.attempt_budget", 4, "must exceed one run of the 'tool' retry policy"),
        ("retry.compensation.MaxAttempts", 7, "one run of the 'compensation' retry policy"),
        ("ledger.retention_days", 14, "must outlast the 14-day redrive window"),
        ("monitoring.sweep_every_minutes", 721, "'monitoring.sweep_every_minutes' must be <= 720"),
    ],
)
def test_bad_values_fail_with_the_key_named(path: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        SagaConfig.from_mapping(_with(path, value))


def test_a_dotted_override_is_refused_not_silently_ignored() -> None:
    with pytest.raises(ConfigError, match=r"'ledger\.attempt_budget' is not read"):
        reject_dotted_overrides(["stage", "ledger.attempt_budget"])
    reject_dotted_overrides(["stage", "aws:cdk:bundling-stacks", "@aws-cdk/core:flag"])


def test_a_section_given_as_json_on_the_command_line_is_read() -> None:
    context = _with(
        "ledger", '{"attempt_budget": 9, "retention_days": 30, "lease_margin_seconds": 10}'
    )
    assert SagaConfig.from_mapping(context).ledger.attempt_budget == 9
    with pytest.raises(ConfigError, match="context 'ledger' must be an object"):
        SagaConfig.from_mapping(_with("ledger", "attempt_budget=9"))


@pytest.mark.parametrize("section", ["retry", "task_retry_class", "functions", "monitoring"])
def test_every_nested_section_can_be_given_as_json(section: str) -> None:
    """The dotted-override refusal tells the user to pass the whole section as JSON; that must
    then work for every nested section, not only `ledger`."""
    context = _context()
    replaced = copy.deepcopy(context[section])
    if section == "retry":
        replaced["compensation"]["MaxAttempts"] = 4
    context[section] = json.dumps(replaced)
    config = SagaConfig.from_mapping(context)
    if section == "retry":
        assert config.retry["compensation"].max_attempts == 4
    if section == "task_retry_class":
        assert dict(config.task_retry_class) == _context()["task_retry_class"]
    with pytest.raises(ConfigError, match=f"context '{section}' must be"):
        SagaConfig.from_mapping(_with(section, "not json"))


def test_library_defaults_are_cdk_json_values() -> None:
    """cdk.json is the one source of deployed values (each function gets them through its
    environment, where nothing has a default); the library's own defaults, which tests and
    sagactl use, are the same values."""
    config = SagaConfig.from_mapping(_context())
    assert LedgerPolicy() == LedgerPolicy(
        attempt_budget=config.ledger.attempt_budget,
        retention_seconds=config.ledger.retention_seconds,
        lease_margin_seconds=config.ledger.lease_margin_seconds,
    )
    assert config.monitoring.stuck_grace_seconds == DEFAULT_GRACE_SECONDS
    assert config.payment_key_retention_hours * 3600 == PAYMENT_KEY_RETENTION_SECONDS
    assert FunctionsConfig.model_fields["log_level"].default == config.functions.log_level
