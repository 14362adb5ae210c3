"""The Stripe API key's secret: who may read it (docs/design.md §11).

Only the functions that call Stripe (their environment declares STRIPE_SECRET: IssueRefund and
ReconcileAction) get `secretsmanager:GetSecretValue`, on that one secret, and only with
`payments=stripe`. A secret named by name is granted as `secret:<name>-??????`: Secrets
Manager appends six random characters to every secret's ARN, and the `?`s match exactly those,
so no other secret whose name starts the same way is readable. A secret encrypted with a
customer-managed KMS key (`stripe_secret_kms_key`) also needs `kms:Decrypt` on that key, only
through Secrets Manager (`kms:ViaService`) and only for this secret (its encryption context,
`SecretARN`). The key's own key policy must let the account's IAM policies grant it (a key's
default policy does): only an account can confirm that (docs/deploy.md).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from stacks.config import SagaConfig
from stacks.constructs.common import acknowledge

SECRETS_MANAGER_SUFFIX = "-??????"  # the six random characters of every secret's ARN


def stripe_secret_arn(secret: str) -> str:
    """The ARN (a pattern for a name) that one secret has: an ARN as given, a name with
    Secrets Manager's suffix in this stack's partition, region and account."""
    if secret.startswith("arn:"):
        return secret
    return (
        f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:"
        f"{secret}{SECRETS_MANAGER_SUFFIX}"
    )


def grant_stripe_secret(role: iam.Role, config: SagaConfig) -> None:
    """Let `role` read the Stripe API key (and decrypt it with its customer-managed key)."""
    secret = config.stripe_secret
    if secret is None:
        raise ValueError("payments=stripe without a stripe_secret (the config refuses it)")
    arn = stripe_secret_arn(secret)
    role.add_to_policy(
        iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[arn])
    )
    if config.stripe_secret_kms_key is not None:
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=[config.stripe_secret_kms_key],
                conditions={
                    "StringEquals": {
                        "kms:ViaService": f"secretsmanager.{Aws.REGION}.amazonaws.com"
                    },
                    "StringLike": {"kms:EncryptionContext:SecretARN": arn},
                },
            )
        )
    if not secret.startswith("arn:"):
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:"
            f"<AWS::AccountId>:secret:{secret}{SECRETS_MANAGER_SUFFIX}]",
            "The Stripe API key's secret is named, not given by ARN: Secrets Manager appends "
            "six random characters to its ARN, which the six '?' match exactly (one secret).",
        )
