"""The cdk context's Stripe settings (stacks/config.py): `payments`, `stripe_secret`,
`stripe_secret_kms_key`, each refused with a message naming it when it cannot work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks.config import ConfigError, SagaConfig
from tests.infra.conftest import four_eyes_own_principals

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:saga/stripe-api-key-a1B2c3"


def config(**overrides: Any) -> SagaConfig:
    """cdk.json's context with `overrides`; the four-eyes approvers name their own principals,
    as synth requires once refunds are real (tests/infra/test_four_eyes_config.py)."""
    context = dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"])
    context["approval_keys"] = four_eyes_own_principals()
    return SagaConfig.from_mapping({**context, **overrides})


def test_the_sandbox_is_the_default_and_needs_no_secret() -> None:
    default = config()
    assert (default.payments, default.stripe_secret, default.stripe_secret_kms_key) == (
        "sandbox",
        None,
        None,
    )


@pytest.mark.parametrize("secret", ["saga/stripe-api-key", "stripe_key", SECRET_ARN])
def test_stripe_with_a_secret_name_or_arn(secret: str) -> None:
    chosen = config(payments="stripe", stripe_secret=secret, stripe_secret_kms_key=KEY)
    assert (chosen.payments, chosen.stripe_secret, chosen.stripe_secret_kms_key) == (
        "stripe",
        secret,
        KEY,
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"payments": "paypal"}, r"context 'payments' must be one of \['sandbox', 'stripe'\]"),
        ({"payments": "stripe"}, r"'payments' is 'stripe': set 'stripe_secret'"),
        ({"stripe_secret": "saga/stripe-api-key"}, r"'stripe_secret' is read only with"),
        ({"stripe_secret_kms_key": KEY}, r"'stripe_secret_kms_key' is read only with"),
        (
            {"payments": "stripe", "stripe_secret": "has space"},
            r"context 'stripe_secret' must be a Secrets Manager secret's name",
        ),
        (
            {"payments": "stripe", "stripe_secret": "arn:aws:s3:::bucket"},
            r"context 'stripe_secret' must be a Secrets Manager secret's name",
        ),
        (
            {"payments": "stripe", "stripe_secret": "s", "stripe_secret_kms_key": "alias/x"},
            r"context 'stripe_secret_kms_key' must be a KMS key ARN",
        ),
        (
            {"payments": "stripe", "stripe_secret": "s", "downstream_timeout_seconds": 7},
            r"a refund at Stripe waits at most 4 times it .* 28 s, .* \(25\)",
        ),
    ],
)
def test_a_stripe_setting_that_cannot_work_is_refused(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**overrides)


def test_the_sandbox_deployment_grants_no_secret_and_tells_validate_case(
    synthesized: Any,
) -> None:
    template = synthesized.template_json
    actions = json.dumps(
        [
            r["Properties"]["PolicyDocument"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy"
        ]
    )
    assert "secretsmanager:" not in actions and "kms:Decrypt" not in actions
    functions = synthesized.saga.stack.tools.functions
    for construct_id in ("ValidateCaseFunction", "IssueRefundFunction", "ReconcileActionFunction"):
        resource = template["Resources"][synthesized.logical_id(functions[construct_id])]
        variables = resource["Properties"]["Environment"]["Variables"]
        assert variables["PAYMENTS_PROVIDER"] == "sandbox", construct_id
        assert "STRIPE_SECRET" not in variables
    refund = template["Resources"][synthesized.logical_id(functions["IssueRefundFunction"])]
    assert "PAYMENTS_TABLE" in refund["Properties"]["Environment"]["Variables"]
