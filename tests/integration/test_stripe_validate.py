"""ValidateCase in a deployment whose refunds go to Stripe: what Stripe cannot refund exactly is
refused before anything is written (saga.providers.stripe_rules), as the function wires it from
its environment; the sandbox deployment refuses none of it, only the faults that the local
Stripe server alone acts out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga.cases import OwningExecution
from saga.errors import InvalidRequest
from saga.models import Case, ValidateResult
from saga.settings import ValidateCaseEnvironment, parse_tenants
from saga.tools.validate import validate_case
from saga.tools.wiring import Runtime
from tests.tools_harness import TENANTS_JSON, ToolsEnv, raw_case, tools_env

TENANTS = parse_tenants(TENANTS_JSON)
OWNER = OwningExecution(
    "arn:aws:states:us-east-1:123456789012:execution:ReplacementOrder:case-0001",
    "2026-11-30T10:00:00.000Z",
)
ENVIRONMENT = {
    "POWERTOOLS_SERVICE_NAME": "validate-case",
    "POWERTOOLS_METRICS_NAMESPACE": "ns",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "CASES_TABLE": "cases",
    "DRAFTS_TABLE": "drafts",
    "LEGACY_DRAFTS_TABLE": "legacy-drafts",
    "APPROVAL_KEYS": '{"acme": {"supervisor@acme": {"current": "arn:k"}}}',
    "APPROVAL_THRESHOLDS": "{}",
    "REFUND_CEILINGS": "{}",
    "LIMITS_TABLE": "limits",
}
PI = "pi_3PgafyB7WZ01zgkW1ZFSgWqJ"


LOCAL_STRIPE = "http://127.0.0.1:12111"


def rules(
    provider: str, *, sandbox: bool, api_base: str | None = None
) -> Callable[[Case], None] | None:
    """ValidateCase's rules as its Runtime builds them from its environment."""
    environ = {**ENVIRONMENT, "PAYMENTS_PROVIDER": provider}
    if sandbox:
        environ["SANDBOX_TABLE"] = "sandbox"
    if api_base is not None:
        environ["STRIPE_API_BASE"] = api_base
    return Runtime(ValidateCaseEnvironment.from_env(environ)).case_rules()


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def validate(
    env: ToolsEnv,
    case: dict[str, Any],
    *,
    sandbox: bool = True,
    provider: str = "stripe",
    api_base: str | None = None,
) -> ValidateResult:
    return validate_case(
        case,
        tenants=TENANTS,
        cases=env.cases,
        execution=OWNER,
        approvals=env.approvals,
        ceilings=env.ceilings,
        drafts=env.drafts,
        case_rules=rules(provider, sandbox=sandbox, api_base=api_base),
    )


def refund(reference: str = PI, amount: int = 2000, currency: str = "USD") -> dict[str, Any]:
    return {"payment_reference": reference, "amount_minor": amount, "currency": currency}


@pytest.mark.parametrize("fault", ["server_error", "rate_limited", "key_in_use"])
def test_the_sandbox_deployment_refuses_the_faults_only_the_local_stripe_server_acts_out(
    env: ToolsEnv, fault: str
) -> None:
    case = raw_case(faults={"refund": ["lose_response", fault]})

    with pytest.raises(InvalidRequest, match=rf"sandbox.faults.refund: {fault}: only the local"):
        validate(env, case, provider="sandbox")
    assert env.case_record("case-0001") is None


@pytest.mark.parametrize(
    ("payment", "amount", "currency"),
    [
        (PI, 2000, "USD"),
        ("ch_3PgafyB7WZ01zgkW1lKyWkxm", 2000, "USD"),
        (PI, 250000, "MGA"),
        (PI, 5120, "KWD"),
        (PI, 25, "ISK"),
        (PI, 2500, "JPY"),
    ],
)
def test_a_case_stripe_can_refund_exactly_is_recorded(
    env: ToolsEnv, payment: str, amount: int, currency: str
) -> None:
    result = validate(env, raw_case(refund=refund(payment, amount, currency)))

    assert result.case["refund"] == refund(payment, amount, currency)  # never rewritten
    assert env.case_record("case-0001") is not None


@pytest.mark.parametrize(
    ("case_refund", "message"),
    [
        (refund("pay-777"), r"refund.payment_reference 'pay-777' names no Stripe payment"),
        (refund("pi_"), r"refund.payment_reference 'pi_' names no Stripe payment"),
        (refund("re_3PgafyB7WZ01zgkW0Ma1Q2"), "PaymentIntent \\(pi_...\\) or the Charge"),
        (refund(amount=250001, currency="MGA"), r"refund.amount_minor: .*multiple of 100"),
        (refund(amount=250050, currency="MGA"), r"refund.amount_minor: .*multiple of 100"),
        (refund(amount=5124, currency="KWD"), r"refund.amount_minor: .*multiples of 10"),
        (refund(amount=5120, currency="IQD"), r"refund.amount_minor: Stripe documents no"),
        (refund(amount=5120, currency="LYD"), r"refund.amount_minor: Stripe documents no"),
    ],
)
def test_what_stripe_cannot_refund_exactly_is_refused_and_nothing_written(
    env: ToolsEnv, case_refund: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        validate(env, raw_case(refund=case_refund))

    assert env.case_record("case-0001") is None


def test_refund_faults_are_refused_even_with_the_sandbox(env: ToolsEnv) -> None:
    with pytest.raises(InvalidRequest, match=r"remove sandbox\.faults\.refund"):
        validate(env, raw_case(refund=refund(), faults={"refund": ["lose_response"]}))
    assert env.case_record("case-0001") is None


@pytest.mark.parametrize("fault", ["in_flight", "server_error", "rate_limited", "key_in_use"])
def test_refund_faults_pass_where_the_local_stripe_server_acts_them_out(
    env: ToolsEnv, fault: str
) -> None:
    """STRIPE_API_BASE names a server other than Stripe's (`sagactl local up --payments
    stripe` sets it): that server acts out the case's refund faults."""
    case = raw_case(refund=refund(), faults={"refund": ["lose_response", fault]})

    validate(env, case, api_base=LOCAL_STRIPE)

    assert env.case_record("case-0001") is not None


def test_other_faults_pass_with_the_sandbox_and_are_refused_without(env: ToolsEnv) -> None:
    faulty = raw_case(refund=refund(), faults={"shipment": ["timeout"]})

    with pytest.raises(InvalidRequest, match=r"sandbox.faults \['shipment'\]: .*no sandbox"):
        validate(env, faulty, sandbox=False)
    assert env.case_record("case-0001") is None

    validate(env, faulty, sandbox=True)
    assert env.case_record("case-0001") is not None


def test_the_sandbox_deployment_accepts_what_stripe_would_refuse(env: ToolsEnv) -> None:
    case = raw_case(refund=refund("pay-777", 250001, "MGA"), faults={"refund": ["reject"]})

    validate_case(
        case,
        tenants=TENANTS,
        cases=env.cases,
        execution=OWNER,
        approvals=env.approvals,
        ceilings=env.ceilings,
        drafts=env.drafts,
        case_rules=rules("sandbox", sandbox=True),
    )

    assert env.case_record("case-0001") is not None
