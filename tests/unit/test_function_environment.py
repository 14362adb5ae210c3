"""Each function's environment (saga.settings): declared once, validated on entry, rendered by
the stack from the same model."""

from __future__ import annotations

import pytest

from saga.approval_keys import ApproverKeys
from saga.ledger import LedgerPolicy
from saga.models import parse_case
from saga.settings import (
    ConfigurationError,
    IssueRefundEnvironment,
    ReleaseReservationEnvironment,
    ReserveStockEnvironment,
    SweepStuckActionsEnvironment,
    ValidateCaseEnvironment,
    parse_tenants,
)
from saga.tools.wiring import Runtime
from tests.tools_harness import APPROVAL_KEYS_JSON, raw_case

POWERTOOLS = {
    "POWERTOOLS_SERVICE_NAME": "reserve-stock",
    "POWERTOOLS_METRICS_NAMESPACE": "ReplacementOrderSaga-test",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}
LEDGER = {
    "LEDGER_TABLE": "ledger",
    "ATTEMPT_BUDGET": "7",
    "RETENTION_SECONDS": "2592000",
    "LEASE_MARGIN_SECONDS": "10",
}
APPROVALS = {"APPROVAL_KEYS": APPROVAL_KEYS_JSON, "APPROVAL_THRESHOLDS": "{}"}
RESERVE = {
    **POWERTOOLS,
    **LEDGER,
    **APPROVALS,
    "INVENTORY_TABLE": "inv",
    "RESERVATIONS_TABLE": "res",
    "CASES_TABLE": "cases",
}


def test_a_function_environment_is_validated_and_names_each_missing_variable() -> None:
    settings = ReserveStockEnvironment.from_env(RESERVE)
    assert settings.ledger_table == "ledger"
    assert settings.ledger_policy().attempt_budget == 7
    with pytest.raises(ConfigurationError, match="CASES_TABLE is required"):
        ReleaseReservationEnvironment.from_env({**RESERVE, "CASES_TABLE": ""})
    # A forward step reads the case record: only a case under way moves forward.
    with pytest.raises(ConfigurationError, match="CASES_TABLE is required"):
        ReserveStockEnvironment.from_env({**RESERVE, "CASES_TABLE": ""})
    # Who may approve is APPROVAL_KEYS' approvers: ValidateCase needs it.
    with pytest.raises(ConfigurationError, match="APPROVAL_KEYS is required"):
        ValidateCaseEnvironment.from_env({**POWERTOOLS, "CASES_TABLE": "cases"})
    with pytest.raises(ConfigurationError, match="APPROVAL_KEYS is required"):
        ReserveStockEnvironment.from_env({k: v for k, v in RESERVE.items() if k not in APPROVALS})
    with pytest.raises(ConfigurationError, match="ATTEMPT_BUDGET must be an integer"):
        ReserveStockEnvironment.from_env({**RESERVE, "ATTEMPT_BUDGET": "many"})
    refund = {
        **POWERTOOLS,
        **LEDGER,
        **APPROVALS,
        "CASES_TABLE": "cases",
        "PAYMENT_KEY_RETENTION_SECONDS": "86400",
    }
    with pytest.raises(ConfigurationError, match="DOWNSTREAM_TIMEOUT_SECONDS must be positive"):
        IssueRefundEnvironment.from_env({**refund, "DOWNSTREAM_TIMEOUT_SECONDS": "0"})


def test_every_wrong_variable_is_named_at_once_and_an_empty_one_counts_as_unset() -> None:
    with pytest.raises(ConfigurationError) as refused:
        ReserveStockEnvironment.from_env(
            {
                **RESERVE,
                "LEDGER_TABLE": "",
                "LEASE_MARGIN_SECONDS": "-1",
                "POWERTOOLS_LOG_LEVEL": "x",
            }
        )
    message = str(refused.value)
    assert "environment variable LEDGER_TABLE is required by this function but not set" in message
    assert "LEASE_MARGIN_SECONDS must be >= 0, got '-1'" in message
    assert "POWERTOOLS_LOG_LEVEL must be 'DEBUG', 'INFO', 'WARNING' or 'ERROR'" in message


def test_no_policy_value_has_a_default_in_a_function() -> None:
    """A function never runs on a value nobody configured: cdk.json, through the stack, is the
    only source; LedgerPolicy's own defaults serve tests and tools."""
    for name in ("ATTEMPT_BUDGET", "RETENTION_SECONDS", "LEASE_MARGIN_SECONDS"):
        partial = {k: v for k, v in RESERVE.items() if k != name}
        with pytest.raises(ConfigurationError, match=f"{name} is required"):
            ReserveStockEnvironment.from_env(partial)
    with pytest.raises(ConfigurationError, match="STUCK_GRACE_SECONDS is required"):
        SweepStuckActionsEnvironment.from_env(
            {**POWERTOOLS, "LEDGER_TABLE": "l", "ESCALATION_QUEUE_URL": "https://q"}
        )


def test_the_stack_renders_exactly_the_declared_variables() -> None:
    values = {
        "powertools_service_name": "validate-case",
        "powertools_metrics_namespace": "ns",
        "powertools_log_level": "INFO",
        "cases_table": "cases",
        "drafts_table": "drafts",
        "legacy_drafts_table": "legacy-drafts",
        "ledger_table": "not-declared-by-validate",
        "attempt_budget": 8,
        "tenants": {"acme": ("b@acme", "a@acme")},
        "approval_keys": {"acme": {"a@acme": {"current": "arn:k1", "retired": ["arn:k0"]}}},
        "approval_thresholds": {},
        "refund_ceilings": {"acme": {"USD": 50_000}},
    }
    assert ValidateCaseEnvironment.render(values) == {
        "POWERTOOLS_SERVICE_NAME": "validate-case",
        "POWERTOOLS_METRICS_NAMESPACE": "ns",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "PYDANTIC_DISABLE_PLUGINS": "__all__",
        "CASES_TABLE": "cases",
        "DRAFTS_TABLE": "drafts",
        "LEGACY_DRAFTS_TABLE": "legacy-drafts",
        "APPROVAL_KEYS": '{"acme":{"a@acme":{"current":"arn:k1","retired":["arn:k0"]}}}',
        "APPROVAL_THRESHOLDS": "{}",
        "PAYMENTS_PROVIDER": "sandbox",
        "REFUND_CEILINGS": '{"acme":{"USD":50000}}',
    }
    rendered = ValidateCaseEnvironment.from_env(ValidateCaseEnvironment.render(values))
    assert rendered.refund_ceilings == {"acme": {"USD": 50_000}}
    assert rendered.tenants() == {"acme": frozenset({"a@acme"})}
    assert rendered.trusted_keys()["acme"]["a@acme"] == ApproverKeys("arn:k1", ("arn:k0",))
    with pytest.raises(ConfigurationError, match=r"ValidateCaseEnvironment: .*CASES_TABLE"):
        ValidateCaseEnvironment.render({**values, "cases_table": None})


def test_an_undeployed_sandbox_table_is_named_when_a_use_needs_it() -> None:
    runtime = Runtime(ReserveStockEnvironment.from_env(RESERVE))
    case = raw_case()
    case["sandbox"] = {"faults": {"reserve": ["timeout"]}}
    with pytest.raises(ConfigurationError, match="no SANDBOX_TABLE"):
        runtime.faults(parse_case(case), "reserve")
    refund = IssueRefundEnvironment.from_env(
        {
            **POWERTOOLS,
            **LEDGER,
            **APPROVALS,
            "CASES_TABLE": "cases",
            "PAYMENT_KEY_RETENTION_SECONDS": "60",
            "DOWNSTREAM_TIMEOUT_SECONDS": "5",
            "SANDBOX_TABLE": "sb",
            "REFUND_CEILINGS": "{}",
            "LIMITS_TABLE": "limits",
        }
    )
    with pytest.raises(ConfigurationError, match="PAYMENTS_TABLE is required"):
        refund.require("payments_table")


def test_a_collaborator_the_model_does_not_declare_is_a_named_wiring_mistake() -> None:
    runtime = Runtime(ReserveStockEnvironment.from_env(RESERVE))
    with pytest.raises(ConfigurationError, match="ReserveStockEnvironment declares no Downstream"):
        assert runtime.downstream_client is None  # raises before
    assert runtime.ledger().policy == LedgerPolicy(
        attempt_budget=7, retention_seconds=2592000, lease_margin_seconds=10
    )


def test_tenants_configuration_is_parsed_and_checked() -> None:
    assert parse_tenants('{"acme": ["a@acme", "b@acme"]}') == {
        "acme": frozenset({"a@acme", "b@acme"})
    }
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        parse_tenants("{")
    with pytest.raises(ConfigurationError, match=r"TENANTS\['acme'\] must be a list"):
        parse_tenants('{"acme": "a@acme"}')


def test_approval_keys_configuration_is_parsed_and_checked() -> None:
    with pytest.raises(ConfigurationError, match="APPROVAL_KEYS is not valid JSON"):
        ReserveStockEnvironment.from_env({**RESERVE, "APPROVAL_KEYS": "{"})
    with pytest.raises(
        ConfigurationError, match=r"APPROVAL_KEYS\['acme'\]\['a@acme'\].current must be a key ARN"
    ):
        ReserveStockEnvironment.from_env({**RESERVE, "APPROVAL_KEYS": '{"acme": {"a@acme": {}}}'})
    with pytest.raises(ConfigurationError, match="APPROVAL_KEYS must be a JSON object"):
        ReserveStockEnvironment.from_env({**RESERVE, "APPROVAL_KEYS": "[]"})
    # The stack's own keys by generation: found by alias under APPROVAL_KEY_ALIASES.
    by_generation = {**RESERVE, "APPROVAL_KEYS": '{"acme":{"a@acme":2}}'}
    with pytest.raises(ConfigurationError, match="needs the stack's alias prefix"):
        ReserveStockEnvironment.from_env(by_generation)
    prefixed = {**by_generation, "APPROVAL_KEY_ALIASES": "alias/Stack/approval"}
    assert ReserveStockEnvironment.from_env(prefixed).trusted_keys() == {
        "acme": {
            "a@acme": ApproverKeys(
                "alias/Stack/approval/acme/a_40acme/2", ("alias/Stack/approval/acme/a_40acme/1",)
            )
        }
    }


def test_refunds_to_stripe_need_the_key_secret_and_only_they() -> None:
    env = {
        **POWERTOOLS,
        **LEDGER,
        **APPROVALS,
        "CASES_TABLE": "cases",
        "PAYMENT_KEY_RETENTION_SECONDS": "86400",
        "DOWNSTREAM_TIMEOUT_SECONDS": "5",
        "REFUND_CEILINGS": "{}",
        "LIMITS_TABLE": "limits",
    }
    assert IssueRefundEnvironment.from_env(env).payments_provider == "sandbox"
    with pytest.raises(ConfigurationError, match=r"PAYMENTS_PROVIDER is stripe: .*STRIPE_SECRET"):
        IssueRefundEnvironment.from_env({**env, "PAYMENTS_PROVIDER": "stripe"})
    with pytest.raises(ConfigurationError, match="PAYMENTS_PROVIDER must be 'sandbox' or"):
        IssueRefundEnvironment.from_env({**env, "PAYMENTS_PROVIDER": "paypal"})
    stripe = IssueRefundEnvironment.from_env(
        {**env, "PAYMENTS_PROVIDER": "stripe", "STRIPE_SECRET": "saga/stripe-api-key"}
    )
    assert (stripe.stripe_secret, stripe.stripe_api_base) == ("saga/stripe-api-key", None)
    with pytest.raises(ConfigurationError, match="STRIPE_API_BASE"):
        IssueRefundEnvironment.from_env(
            {**env, "PAYMENTS_PROVIDER": "stripe", "STRIPE_SECRET": "s", "STRIPE_API_BASE": "x"}
        )
