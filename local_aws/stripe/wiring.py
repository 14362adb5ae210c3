"""The local Stripe server beside the local AWS (`sagactl local up --payments stripe`, the tests).

`stripe_context()` is what the CDK app is synthesized with: refunds through Stripe, the API
key's secret by name, and the four-eyes tenants' approvers naming their own principals (synth
refuses the account-wide approver default with Stripe: docs/deploy.md). `attach()` wires a
provisioned stack to a running server: the secret in the local Secrets Manager holding the
server's key, `STRIPE_API_BASE` on every function whose refunds go to Stripe (with it,
ValidateCase accepts the cases' refund faults, which the server acts out), the server's fault
plans read from this account's cases, and the payments the example cases (examples/stripe/)
refund.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from local_aws.environment import LocalAws
from local_aws.stripe.faults import ExecutionPlans
from local_aws.stripe.server import LocalStripe
from sagactl.paths import PROJECT_ROOT

LOCAL_SECRET_NAME: Final = "saga-local/stripe-api-key"  # noqa: S105 (its name, not a key)
STRIPE_API_BASE: Final = "STRIPE_API_BASE"
OUTPUT: Final = "StripeApiBase"
LOCAL_PRINCIPALS_ACCOUNT: Final = "123456789012"  # the local AWS's account
# The payments examples/stripe/ refunds: id -> (amount in minor units, currency, disputed).
SEEDED_PAYMENTS: Final[Mapping[str, tuple[int, str, bool]]] = {
    "pi_local_happy_path": (5000, "USD", False),
    "pi_local_lost_refund_response": (5000, "USD", False),
    "pi_local_refund_in_flight": (5000, "USD", False),
    "pi_local_refund_disputed": (5000, "USD", True),
    "pi_local_stripe_unavailable": (5000, "USD", False),
}


class StripeNotDeployed(ValueError):
    """The provisioned stack's refunds do not go to Stripe (synthesized without payments=stripe)."""


def stripe_context(cdk_json: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The context `-c payments=stripe` needs locally, over cdk.json's."""
    if cdk_json is None:
        cdk_json = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    tenants: Mapping[str, list[str]] = cdk_json.get("tenants", {})
    four_eyes = sorted(cdk_json.get("approval_thresholds", {}))
    return {
        "payments": "stripe",
        "stripe_secret": LOCAL_SECRET_NAME,
        "approval_keys": {
            f"{tenant}/{approver}": {
                "role_assumed_by": [f"arn:aws:iam::{LOCAL_PRINCIPALS_ACCOUNT}:user/{approver}"]
            }
            for tenant in four_eyes
            for approver in sorted(tenants.get(tenant, []))
        },
    }


def stripe_functions(local: LocalAws) -> dict[str, dict[str, str]]:
    """The provisioned functions whose refunds go to Stripe: name -> environment."""
    assert local.provisioned is not None
    client = local.client("lambda")
    found = {}
    for name in local.provisioned.functions.values():
        configuration = client.get_function_configuration(FunctionName=name)
        variables = dict(configuration.get("Environment", {}).get("Variables", {}))
        if variables.get("PAYMENTS_PROVIDER") == "stripe":
            found[name] = variables
    return found


def attach(local: LocalAws, stripe: LocalStripe, *, seed: bool = True) -> None:
    """Wire the provisioned stack to `stripe` (a running server), as the module says; the
    server starts from an empty account."""
    functions = stripe_functions(local)
    if not functions:
        raise StripeNotDeployed(
            f"the stack {local.source.stack_name} sends its refunds to the sandbox: synthesize "
            "it with `-c payments=stripe` (`sagactl local up --payments stripe` does)"
        )
    secrets = local.client("secretsmanager")
    for name in sorted({v["STRIPE_SECRET"] for v in functions.values() if "STRIPE_SECRET" in v}):
        try:
            secrets.create_secret(Name=name, SecretString=stripe.api_key)
        except secrets.exceptions.ResourceExistsException:
            secrets.put_secret_value(SecretId=name, SecretString=stripe.api_key)
    client = local.client("lambda")
    for name, variables in functions.items():
        client.update_function_configuration(
            FunctionName=name,
            Environment={"Variables": {**variables, STRIPE_API_BASE: stripe.url}},
        )
    stripe.reset(
        ExecutionPlans(
            local.client("dynamodb"),
            local.client("stepfunctions"),
            local.outputs["CasesTableName"],
        )
    )
    if seed:
        for intent_id, (amount, currency, disputed) in SEEDED_PAYMENTS.items():
            stripe.account.seed_payment(intent_id, amount, currency, disputed=disputed)
    local.extra_outputs[OUTPUT] = stripe.url
