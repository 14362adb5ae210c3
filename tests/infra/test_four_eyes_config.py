"""`approval_thresholds` (stacks/four_eyes_config.py): what synth refuses, with the key's name,
and what the functions and the stack's outputs carry."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from saga.settings import ConfigurationError, ValidateCaseEnvironment
from stacks.config import ConfigError, SagaConfig
from tests.infra.synth import Synthesized

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
BROUGHT = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555566667777"
PRINCIPAL = "arn:aws:iam::123456789012:role/finance-signer"
ACME_USD_1, ACME_USD_0 = '{"acme":{"USD":1}}', '{"acme":{"USD":0}}'


def _context(**changes: Any) -> dict[str, Any]:
    context = copy.deepcopy(dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]))
    context.update(changes)
    return context


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        (
            {"hooli": {"USD": 0}},
            "context 'approval_thresholds.hooli.USD' must be a positive integer of minor units, "
            "got 0",
        ),
        ({"hooli": {"USD": "1000"}}, "got '1000'"),
        ({"hooli": {"USD": 99.5}}, "got 99.5"),
        ({"hooli": {"USD": True}}, "got True"),
        (
            {"hooli": {"usd": 100}},
            "context 'approval_thresholds.hooli': 'usd' must be the ISO 4217 code of a "
            "circulating currency",
        ),
        ({"hooli": {"XTS": 100}}, "'XTS' must be the ISO 4217 code"),
        ({"hooli": {}}, "context 'approval_thresholds.hooli' must be a non-empty object"),
        (
            {"initech": {"USD": 100}},
            "context 'approval_thresholds.initech' names no tenant of 'tenants'",
        ),
        (
            {"acme": {"USD": 100}},
            "context 'approval_thresholds.acme': four eyes needs at least 2 approvers of the "
            "tenant, 'tenants.acme' has 1",
        ),
        ([], "context 'approval_thresholds' must be an object"),
    ],
)
def test_synth_refuses_thresholds_four_eyes_cannot_honour(thresholds: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        SagaConfig.from_mapping(_context(approval_thresholds=thresholds))


def test_a_tenant_listing_one_approver_twice_has_one() -> None:
    tenants = {**_context()["tenants"], "hooli": ["cfo@hooli", "cfo@hooli"]}
    with pytest.raises(ConfigError, match=re.escape("'tenants.hooli' has 1")):
        SagaConfig.from_mapping(_context(tenants=tenants))


@pytest.mark.parametrize(
    ("approval_keys", "shared"),
    [
        (
            {
                "hooli/cfo@hooli": {"key_arn": BROUGHT},
                "hooli/controller@hooli": {"key_arn": BROUGHT},
            },
            f"the key {BROUGHT}",
        ),
        (
            {
                "hooli/cfo@hooli": {"key_arn": BROUGHT},
                "hooli/controller@hooli": {"retired_key_arns": [BROUGHT]},
            },
            f"the key {BROUGHT}",
        ),
        (
            {
                "hooli/cfo@hooli": {"principal": PRINCIPAL},
                "hooli/controller@hooli": {"principal": PRINCIPAL},
            },
            f"the signing principal {PRINCIPAL}",
        ),
    ],
)
def test_two_approvers_of_one_tenant_may_not_share_a_key_or_a_signer(
    approval_keys: dict[str, Any], shared: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_context(approval_keys=approval_keys))
    assert str(refused.value) == (
        f"context 'approval_keys': 'controller@hooli' and 'cfo@hooli' of tenant 'hooli' share "
        f"{shared}: approvals are counted by key, so one person could count as two approvers; "
        "give each approver their own key and principal"
    )


def test_approvers_of_different_tenants_may_share_a_principal() -> None:
    """One person may approve for two tenants: each tenant still counts them once."""
    config = SagaConfig.from_mapping(
        _context(
            approval_keys={
                "acme/supervisor@acme": {"principal": PRINCIPAL},
                "hooli/cfo@hooli": {"principal": PRINCIPAL},
            }
        )
    )
    assert config.approver_keys("hooli", "cfo@hooli").principal == PRINCIPAL


def test_a_function_refuses_thresholds_for_a_tenant_with_fewer_than_two_approvers() -> None:
    """The same rule where the environment is read (a function deployed by hand)."""
    environment = {
        "POWERTOOLS_SERVICE_NAME": "validate-case",
        "POWERTOOLS_METRICS_NAMESPACE": "ns",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "CASES_TABLE": "cases",
        "APPROVAL_KEYS": '{"acme":{"a@acme":{"current":"arn:k1"}}}',
        "REFUND_CEILINGS": "{}",
    }
    with pytest.raises(ConfigurationError, match=r"APPROVAL_THRESHOLDS\['acme'\]: four eyes"):
        ValidateCaseEnvironment.from_env(
            {**environment, "APPROVAL_THRESHOLDS": '{"acme":{"USD":1}}'}
        )
    with pytest.raises(ConfigurationError, match="APPROVAL_THRESHOLDS is required"):
        ValidateCaseEnvironment.from_env(environment)
    with pytest.raises(ConfigurationError, match="positive integer of minor units"):
        ValidateCaseEnvironment.from_env(
            {**environment, "APPROVAL_THRESHOLDS": '{"acme":{"USD":0}}'}
        )


def test_every_verifying_function_and_the_outputs_carry_the_thresholds(
    synthesized: Synthesized,
) -> None:
    expected = {"hooli": {"EUR": 100_000, "GBP": 80_000, "JPY": 150_000, "USD": 100_000}}
    verifying = [
        function["Properties"]["Environment"]["Variables"]
        for function in synthesized.resources("AWS::Lambda::Function").values()
        if "APPROVAL_KEYS" in function["Properties"]["Environment"]["Variables"]
    ]
    assert len(verifying) == 7  # the tools but the sweeper
    for variables in verifying:
        assert json.loads(variables["APPROVAL_THRESHOLDS"]) == expected
    output = synthesized.template_json["Outputs"]["ApprovalThresholds"]["Value"]
    assert json.loads(output) == expected
