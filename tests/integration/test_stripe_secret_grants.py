"""The Stripe API key's grants, evaluated offline (offline_iam) against the calls the code makes.

The stack is synthesized with `payments=stripe`, a secret given by name and a customer-managed
KMS key. In moto, that key encrypts that secret (and a second secret whose name starts the same
way). The functions' own key read (saga.tools.wiring.stripe_api_key, Powertools' parameters
through the trimmed Secrets Manager client) is recorded as each function that calls Stripe, and
every request IAM makes for it (GetSecretValue on the secret's ARN, kms:Decrypt via Secrets
Manager with the secret's encryption context) is evaluated against that function's role: each
is allowed, each statement is used, the other secret is denied, and no other function may read
the key. The local AWS never calls Secrets Manager otherwise, so this is where the grants are
exercised (tests/e2e/test_grants_match_calls.py covers the sandbox deployment).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local_aws.aws_calls import acting_as, recording_aws_calls
from offline_iam.coverage import evaluate_calls, unused_grants
from offline_iam.evaluate import Request, evaluate
from offline_iam.requests import Account
from offline_iam.stack_policies import StackPolicies, offline_resolver, stack_policies
from saga.tools import wiring
from tests.infra.conftest import four_eyes_own_principals
from tests.infra.synth import Synthesized, synthesize

ACCOUNT, REGION = "123456789012", "us-east-1"  # moto's
SECRET = "saga/stripe-api-key"
KEY_VALUE = "rk_test_51RecordedRestrictedKey"
CALLERS = ("IssueRefundFunction", "ReconcileActionFunction")


@dataclass(frozen=True)
class Deployed:
    synth: Synthesized
    policies: StackPolicies
    account: Account
    secret_arn: str
    other_arn: str

    def role_of(self, function_id: str) -> str:
        fn = self.synth.saga.stack.tools.functions[function_id]
        return self.policies.role_of_function[self.synth.logical_id(fn)]


@pytest.fixture(scope="module")
def deployed() -> Iterator[Deployed]:
    """The whole module runs in this moto: the key and the secrets the code reads."""
    with mock_aws():
        kms = boto3.client("kms", region_name=REGION)
        key = kms.create_key(Description="the Stripe key's secret")["KeyMetadata"]["Arn"]
        secrets = boto3.client("secretsmanager", region_name=REGION)
        arn = secrets.create_secret(Name=SECRET, SecretString=KEY_VALUE, KmsKeyId=key)["ARN"]
        other = secrets.create_secret(
            Name=f"{SECRET}-old", SecretString="sk_test_other", KmsKeyId=key
        )["ARN"]
        context = {
            "payments": "stripe",
            "stripe_secret": SECRET,
            "stripe_secret_kms_key": key,
            # Real refunds: the four-eyes approvers name their own principals (synth's rule).
            "approval_keys": four_eyes_own_principals(),
        }
        synth = synthesize(Path(tempfile.mkdtemp(prefix="stripe-grants-")), context)
        template = synth.template_json
        resolver = offline_resolver(
            template, synth.saga.stack.stack_name, account_id=ACCOUNT, region=REGION
        )
        account = Account(
            account_id=ACCOUNT,
            partition_keys={},
            secrets={
                SECRET: (arn, key),
                arn: (arn, key),
                f"{SECRET}-old": (other, key),
            },
        )
        yield Deployed(synth, stack_policies(template, resolver), account, arn, other)


def read_key_as(function_id: str, secret: str) -> list[Any]:
    """The function's own key read, recorded as its calls (a fresh cache: one request)."""
    wiring._SECRETS.clear()
    with recording_aws_calls() as calls, acting_as(function_id):
        assert wiring.stripe_api_key(secret) == KEY_VALUE
    return calls


@pytest.mark.parametrize("function_id", CALLERS)
def test_each_function_that_calls_stripe_may_read_the_key_and_every_grant_is_used(
    deployed: Deployed, function_id: str
) -> None:
    calls = read_key_as(function_id, SECRET)
    role = deployed.role_of(function_id)
    session = deployed.policies.roles[role].session_context(mfa=False)

    evaluated = evaluate_calls(calls, deployed.account, deployed.policies.grants(role), session)

    assert [(e.request.action, e.request.resource) for e in evaluated] == [
        ("secretsmanager:GetSecretValue", deployed.secret_arn),
        ("kms:Decrypt", deployed.account.secrets[SECRET][1]),
    ]
    assert all(e.allowed for e in evaluated), [e.line() for e in evaluated]
    unused = [
        (action, resource)
        for action, resource in unused_grants(
            deployed.policies.roles[role], [e.request for e in evaluated]
        )
        if action.startswith(("secretsmanager:", "kms:Decrypt"))
    ]
    assert unused == []


def test_only_that_secret_and_only_through_secrets_manager(deployed: Deployed) -> None:
    role = deployed.role_of("IssueRefundFunction")
    grants = deployed.policies.grants(role)
    session = deployed.policies.roles[role].session_context(mfa=False)
    key = deployed.account.secrets[SECRET][1]
    assert key is not None

    other = Request("secretsmanager:GetSecretValue", deployed.other_arn, session)
    direct = Request("kms:Decrypt", key, {**session, "kms:CallerAccount": ACCOUNT})
    for_other = Request(
        "kms:Decrypt",
        key,
        {
            **session,
            "kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com",
            "kms:EncryptionContext:SecretARN": deployed.other_arn,
        },
    )

    assert not evaluate(grants, other).allowed
    assert not evaluate(grants, direct).allowed
    assert not evaluate(grants, for_other).allowed


def test_no_other_function_may_read_the_key(deployed: Deployed) -> None:
    request = Request("secretsmanager:GetSecretValue", deployed.secret_arn, {})
    for function_id in deployed.synth.saga.stack.tools.functions:
        if function_id in CALLERS:
            continue
        role = deployed.role_of(function_id)
        session = deployed.policies.roles[role].session_context(mfa=False)
        verdict = evaluate(
            deployed.policies.grants(role),
            Request(request.action, request.resource, session),
        )
        assert not verdict.allowed, function_id


def _variables(deployed: Deployed, function_id: str) -> dict[str, Any]:
    fn = deployed.synth.saga.stack.tools.functions[function_id]
    resource = deployed.synth.template_json["Resources"][deployed.synth.logical_id(fn)]
    variables: dict[str, Any] = resource["Properties"]["Environment"]["Variables"]
    return variables


def test_with_stripe_the_refund_loses_the_sandbox_payment_tables(deployed: Deployed) -> None:
    refund = _variables(deployed, "IssueRefundFunction")
    assert refund["PAYMENTS_PROVIDER"] == "stripe" and refund["STRIPE_SECRET"] == SECRET
    assert "PAYMENTS_TABLE" not in refund and "SANDBOX_TABLE" not in refund
    reconcile = _variables(deployed, "ReconcileActionFunction")
    assert "PAYMENTS_TABLE" not in reconcile and "SANDBOX_TABLE" in reconcile  # shipments
    validate = _variables(deployed, "ValidateCaseFunction")
    assert validate["PAYMENTS_PROVIDER"] == "stripe" and "STRIPE_SECRET" not in validate
    sandbox = deployed.synth.saga.stack.sandbox
    assert sandbox is not None
    tables = {
        deployed.synth.logical_id(sandbox.payments),
        deployed.synth.logical_id(sandbox.control),
    }
    role = deployed.role_of("IssueRefundFunction")
    granted = json.dumps(
        [
            statement
            for policy in deployed.synth.resources("AWS::IAM::Policy").values()
            if any(r.get("Ref") == role for r in policy["Properties"]["Roles"])
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
    )
    assert not any(table in granted for table in tables)
