"""Approval keys (docs/design.md §9): one asymmetric KMS signing key per approver of each tenant.

A key per approver, not per tenant, so a signature says which person approved. Each created key
has its own key policy, not CDK's default (which delegates everything, `kms:Sign` included, to
the account root and so to any principal with a broad IAM policy):

- the account root may administer the key and read its public key (so IAM policies can let the
  saga's functions call GetPublicKey), but not sign, verify or create grants (a grant could hand
  `kms:Sign` to anyone);
- exactly one principal may sign: the approver's role that this construct creates (assumable
  from the account, with MFA unless configured otherwise) or the principal the configuration
  names for that approver.

A key the configuration brings (`key_arn`) is used as it is: who may sign with it is that key's
own policy. Rotating a created key raises `key_generation`: earlier generations stay as retired
keys that nobody may sign with and that still verify the approvals of cases under way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from saga.approvals import APPROVER_TAG, GENERATION_TAG, TENANT_TAG
from stacks.config import SagaConfig
from stacks.config_sections import ApproverKeyConfig
from stacks.constructs.common import acknowledge

# What the account (and so IAM policies in it) may do with an approval key: manage it and read
# its public key. Never kms:Sign, kms:Verify, kms:CreateGrant or a wildcard that covers them.
KEY_ADMINISTRATION_ACTIONS = (
    "kms:CancelKeyDeletion",
    "kms:CreateAlias",
    "kms:DeleteAlias",
    "kms:DescribeKey",
    "kms:DisableKey",
    "kms:EnableKey",
    "kms:GetKeyPolicy",
    "kms:GetPublicKey",
    "kms:ListAliases",
    "kms:ListGrants",
    "kms:ListKeyPolicies",
    "kms:ListResourceTags",
    "kms:PutKeyPolicy",
    "kms:RetireGrant",
    "kms:RevokeGrant",
    "kms:ScheduleKeyDeletion",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:UpdateAlias",
    "kms:UpdateKeyDescription",
)
SIGNER_ACTIONS = ("kms:Sign", "kms:GetPublicKey", "kms:DescribeKey")
VERIFIER_ACTIONS = ("kms:GetPublicKey",)


@dataclass
class ApproverKeyRefs:
    """One approver's keys as the stack knows them (ARNs may be deploy-time tokens)."""

    current: str
    retired: list[str] = field(default_factory=list)
    role: iam.Role | None = None

    def variable(self) -> dict[str, object]:
        return {"current": self.current, "retired": list(self.retired)}


def _id_part(text: str) -> str:
    """A construct id fragment from a tenant or approver name (`supervisor@acme` ->
    `SupervisorAtAcme`), stable across synths."""
    words = re.split(r"[^A-Za-z0-9]+", text.replace("@", " at "))
    return "".join(word[:1].upper() + word[1:] for word in words if word)


class ApprovalKeys(Construct):
    """The approval keys of every approver, their approver roles, and what to grant verifiers."""

    def __init__(self, scope: Construct, construct_id: str, *, config: SagaConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        self.approvers: dict[str, dict[str, ApproverKeyRefs]] = {}
        # The keys this stack creates: "<tenant>/<approver>" (+ "#<generation>" after the 1st).
        self.created: dict[str, kms.Key] = {}
        for tenant, approvers in sorted(config.tenants.items()):
            for approver in sorted(approvers):
                spec = config.approver_keys(tenant, approver)
                refs = self._approver(tenant, approver, spec, removal)
                self.approvers.setdefault(tenant, {})[approver] = refs

    def _approver(
        self, tenant: str, approver: str, spec: ApproverKeyConfig, removal: RemovalPolicy
    ) -> ApproverKeyRefs:
        base = f"{_id_part(tenant)}{_id_part(approver)}"
        if spec.key_arn is not None:
            return ApproverKeyRefs(current=spec.key_arn, retired=list(spec.retired_key_arns))
        role: iam.Role | None = None
        signer: iam.IPrincipal
        if spec.principal is not None:
            signer = iam.ArnPrincipal(spec.principal)
        else:
            role = self._approver_role(base, tenant, approver, spec.role_requires_mfa)
            signer = role
        keys = [
            self._key(
                base,
                tenant,
                approver,
                generation,
                removal,
                signer=signer if generation == spec.key_generation else None,
            )
            for generation in range(1, spec.key_generation + 1)
        ]
        return ApproverKeyRefs(
            current=keys[-1].key_arn,
            retired=[key.key_arn for key in keys[:-1]] + list(spec.retired_key_arns),
            role=role,
        )

    def _approver_role(self, base: str, tenant: str, approver: str, mfa: bool) -> iam.Role:
        principal: iam.PrincipalBase = iam.AccountRootPrincipal()
        if mfa:
            principal = principal.with_conditions({"Bool": {"aws:MultiFactorAuthPresent": "true"}})
        role = iam.Role(
            self,
            f"{base}ApproverRole",
            assumed_by=principal,
            description=f"Signs approvals of {approver} for tenant {tenant} (kms:Sign on one key)",
            max_session_duration=Duration.hours(1),
        )
        # `sagactl case approve` reads the stack's ApprovalKeys output to find the key.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudformation:DescribeStacks"], resources=[Stack.of(self).stack_id]
            )
        )
        return role

    def _key(
        self,
        base: str,
        tenant: str,
        approver: str,
        generation: int,
        removal: RemovalPolicy,
        *,
        signer: iam.IPrincipal | None,
    ) -> kms.Key:
        statements = [
            iam.PolicyStatement(
                sid="AccountAdministersAndReadsThePublicKey",
                principals=[iam.AccountRootPrincipal()],
                actions=list(KEY_ADMINISTRATION_ACTIONS),
                resources=["*"],
            )
        ]
        if signer is not None:
            statements.append(
                iam.PolicyStatement(
                    sid="OnlyTheApproverSigns",
                    principals=[signer],
                    actions=list(SIGNER_ACTIONS),
                    resources=["*"],
                )
            )
        suffix = "" if generation == 1 else f"G{generation}"
        key = kms.Key(
            self,
            f"{base}Key{suffix}",
            description=(
                f"Approval signing key of {approver} for tenant {tenant} (generation "
                f"{generation}{'' if signer is not None else ', retired: verifies only'})"
            ),
            key_spec=kms.KeySpec.ECC_NIST_P256,
            key_usage=kms.KeyUsage.SIGN_VERIFY,
            policy=iam.PolicyDocument(statements=statements),
            removal_policy=removal,
            pending_window=Duration.days(30),
        )
        self.created[f"{tenant}/{approver}" + ("" if generation == 1 else f"#{generation}")] = key
        Tags.of(key).add(TENANT_TAG, tenant)
        Tags.of(key).add(APPROVER_TAG, approver)
        Tags.of(key).add(GENERATION_TAG, str(generation))
        acknowledge(
            key,
            "AwsSolutions-KMS5",
            "Asymmetric (ECC_NIST_P256 SIGN_VERIFY) keys cannot rotate automatically; rotation "
            "is a new key generation (approval_keys.<tenant>/<approver>.key_generation).",
        )
        return key

    # --- what the rest of the stack needs ------------------------------------------------------
    def trusted_keys(self) -> dict[str, dict[str, dict[str, object]]]:
        """The APPROVAL_KEYS value: tenant -> approver -> {current, retired} (ARNs)."""
        return {
            tenant: {approver: refs.variable() for approver, refs in approvers.items()}
            for tenant, approvers in self.approvers.items()
        }

    def key_arns(self) -> list[str]:
        return [
            arn
            for approvers in self.approvers.values()
            for refs in approvers.values()
            for arn in (refs.current, *refs.retired)
        ]

    def grant_verify(self, grantee: iam.IGrantable) -> None:
        """GetPublicKey on every approval key (current and retired), nothing else."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(VERIFIER_ACTIONS), resources=self.key_arns())
        )

    def add_outputs(self, scope: Construct) -> None:
        """`ApprovalKeys` and `ApproverRoles`: JSON tenant -> approver -> ARN."""
        keys = {
            tenant: {approver: refs.current for approver, refs in approvers.items()}
            for tenant, approvers in self.approvers.items()
        }
        roles = {
            tenant: {
                approver: refs.role.role_arn
                for approver, refs in approvers.items()
                if refs.role is not None
            }
            for tenant, approvers in self.approvers.items()
        }
        CfnOutput(scope, "ApprovalKeys", value=_json(keys))
        CfnOutput(scope, "ApproverRoles", value=_json({t: r for t, r in roles.items() if r}))


def _json(value: object) -> str:
    # Tokens (ARNs known at deploy time) are embedded as strings and resolved by CloudFormation.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
