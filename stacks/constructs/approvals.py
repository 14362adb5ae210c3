"""Approval keys (docs/design.md §9): one asymmetric KMS signing key per approver of each tenant.

A key per approver, not per tenant, so a signature says which person approved. Each created key
has its own key policy, not CDK's default (which delegates everything, `kms:Sign` included, to
the account root and so to any principal with a broad IAM policy):

- the account root may administer the key and read its public key (so IAM policies can let the
  saga's functions call GetPublicKey), but not sign, verify or create grants (a grant could hand
  `kms:Sign` to anyone);
- exactly one principal may sign: the approver's role that this construct creates (assumable
  from the account, with MFA unless configured otherwise) or the principal the configuration
  names for that approver. The role is not the key policy's principal: KMS refuses a key
  policy naming a principal it cannot see yet (MalformedPolicyDocumentException, "the
  principals in the key policy must exist and be visible to KMS", CreateKey's API reference),
  and a role created in the same deployment may not be visible yet; CloudFormation does not
  retry, the stack rolls back. The statement names the account (which always exists) and
  confines it with conditions, strings KMS does not resolve: `aws:PrincipalArn` the role's ARN
  and `aws:userid` the role's unique id (a role deleted and re-created under the same name has
  another id, so it cannot sign), signing ECDSA_SHA_256 over a RAW message only. Through the
  account principal IAM policies apply too, so the role's own policy allows kms:Sign on this key
  and nothing else of KMS (docs/design.md §9).

Each created key has an alias, `alias/<stack>/approval/<tenant>/<approver>/<generation>`
(saga.approval_keys.approval_key_alias): the functions find the keys by it, so their
environment holds a generation number per approver, not the deploy-time ARNs.

A key the configuration brings (`key_arn`) is used as it is: who may sign with it is that key's
own policy. Rotating a created key raises `key_generation`: earlier generations stay as retired
keys that nobody may sign with and that still verify the approvals of cases under way.

Four eyes means two people: synth refuses a four-eyes tenant whose approver roles one principal
could assume (stacks/four_eyes_config.py), and accepts the default trust (the whole account)
only with the sandbox and its payments provider, where this construct warns of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from saga.approval_keys import ALIAS_MAX_LENGTH, approval_key_alias
from saga.approvals import APPROVER_TAG, GENERATION_TAG, SIGNING_ALGORITHM, TENANT_TAG
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
SIGNER_ACTIONS = ("kms:Sign",)
VERIFIER_ACTIONS = ("kms:GetPublicKey",)
# How an approval is signed (saga.approvals, sagactl.operations.signing): nothing else may be.
SIGNING_CONDITIONS = {
    "StringEquals": {"kms:SigningAlgorithm": SIGNING_ALGORITHM, "kms:MessageType": "RAW"}
}


@dataclass
class ApproverKeyRefs:
    """One approver's keys as the stack knows them (ARNs may be deploy-time tokens)."""

    current: str
    retired: list[str] = field(default_factory=list)
    role: iam.Role | None = None
    # For keys this stack created: their generations (named by alias in the environment).
    generations: int = 0
    brought_retired: list[str] = field(default_factory=list)

    def variable(self) -> object:
        """This approver's APPROVAL_KEYS entry: the generation count for created keys (each
        found by its alias), else the ARNs (saga.approval_keys.parse_trusted_keys)."""
        if self.generations and not self.brought_retired:
            return self.generations
        if self.generations:
            retired: list[object] = [*range(1, self.generations), *self.brought_retired]
            return {"current": self.generations, "retired": retired}
        return {"current": self.current, "retired": list(self.retired)}


def four_eyes_account_trust_warning(tenant: str, approvers: list[str]) -> str:
    """The synth warning for a four-eyes tenant whose approver roles trust the whole account."""
    return (
        f"Four eyes of tenant {tenant} is not two people: the approver role of "
        f"{' and of '.join(approvers)} trusts the whole account, so one principal allowed "
        "sts:AssumeRole (an administrator) may assume two approver roles and sign a refund "
        "above the threshold alone. Accepted only because 'sandbox' is on with the sandbox "
        f"payments provider; before real money moves, name each approver's own principal "
        f'(approval_keys."{tenant}/<approver>".role_assumed_by, docs/deploy.md).'
    )


def id_part(text: str) -> str:
    """A construct id fragment from a tenant or approver name (`supervisor@acme` ->
    `SupervisorAtAcme`), stable across synths."""
    words = re.split(r"[^A-Za-z0-9]+", text.replace("@", " at "))
    return "".join(word[:1].upper() + word[1:] for word in words if word)


class ApprovalKeys(Construct):
    """The approval keys of every approver, their approver roles, and what to grant verifiers."""

    def __init__(self, scope: Construct, construct_id: str, *, config: SagaConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        # Where the created keys' aliases live (APPROVAL_KEY_ALIASES): one name space per stack.
        self.alias_prefix = f"alias/{Stack.of(self).stack_name}/approval"
        self.approvers: dict[str, dict[str, ApproverKeyRefs]] = {}
        # The keys this stack creates: "<tenant>/<approver>" (+ "#<generation>" after the 1st).
        self.created: dict[str, kms.Key] = {}
        for tenant, approvers in sorted(config.tenants.items()):
            for approver in sorted(approvers):
                spec = config.approver_keys(tenant, approver)
                refs = self._approver(tenant, approver, spec, removal)
                self.approvers.setdefault(tenant, {})[approver] = refs
        self._warn_of_account_wide_four_eyes(config)

    def _warn_of_account_wide_four_eyes(self, config: SagaConfig) -> None:
        """A synth warning per four-eyes tenant whose approver roles trust the whole account
        (the config allows it only with the sandbox and its payments provider)."""
        by_tenant: dict[str, list[str]] = {}
        for tenant, approver in config.account_wide_four_eyes_approvers():
            by_tenant.setdefault(tenant, []).append(approver)
        for tenant, approvers in sorted(by_tenant.items()):
            Annotations.of(self).add_warning_v2(
                f"saga:four-eyes-account-trust:{tenant}",
                four_eyes_account_trust_warning(tenant, approvers),
            )

    def _approver(
        self, tenant: str, approver: str, spec: ApproverKeyConfig, removal: RemovalPolicy
    ) -> ApproverKeyRefs:
        base = f"{id_part(tenant)}{id_part(approver)}"
        if spec.key_arn is not None:
            return ApproverKeyRefs(current=spec.key_arn, retired=list(spec.retired_key_arns))
        role: iam.Role | None = None
        signer: iam.PolicyStatement
        if spec.principal is not None:
            signer = self._signer_statement(iam.ArnPrincipal(spec.principal))
        else:
            role = self._approver_role(base, tenant, approver, spec)
            signer = self._signer_statement(
                iam.AccountRootPrincipal(),
                {
                    "ArnEquals": {"aws:PrincipalArn": role.role_arn},
                    "StringLike": {"aws:userid": f"{role.role_id}:*"},
                },
            )
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
        if role is not None:
            # Through the account principal the role's own policy counts: Sign, on this key.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=list(SIGNER_ACTIONS),
                    resources=[keys[-1].key_arn],
                    conditions=SIGNING_CONDITIONS,
                )
            )
        return ApproverKeyRefs(
            current=keys[-1].key_arn,
            retired=[key.key_arn for key in keys[:-1]] + list(spec.retired_key_arns),
            role=role,
            generations=spec.key_generation,
            brought_retired=list(spec.retired_key_arns),
        )

    @staticmethod
    def _signer_statement(
        principal: iam.IPrincipal, confined: dict[str, dict[str, str]] | None = None
    ) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            sid="OnlyTheApproverSigns",
            principals=[principal],
            actions=list(SIGNER_ACTIONS),
            resources=["*"],
            conditions={**SIGNING_CONDITIONS, **(confined or {})},
        )

    def _approver_role(
        self, base: str, tenant: str, approver: str, spec: ApproverKeyConfig
    ) -> iam.Role:
        """The role that signs as this approver; what else its flows call (the stack's
        outputs, its tenant's drafts) is granted with the other people's roles
        (stacks/constructs/people.py). Trusted: the account (which delegates to its
        principals' own policies), confined to `role_assumed_by` when that names any: a
        condition on aws:PrincipalArn, not a principal of the statement, so a principal
        deleted later never turns the trust policy into an unmatchable id."""
        conditions: dict[str, Any] = {}
        if spec.role_requires_mfa:
            conditions["Bool"] = {"aws:MultiFactorAuthPresent": "true"}
        if spec.role_assumed_by:
            conditions["ArnEquals"] = {"aws:PrincipalArn": list(spec.role_assumed_by)}
        principal: iam.PrincipalBase = iam.AccountRootPrincipal()
        if conditions:
            principal = principal.with_conditions(conditions)
        return iam.Role(
            self,
            f"{base}ApproverRole",
            assumed_by=principal,
            description=f"Signs approvals of {approver} for tenant {tenant} (kms:Sign on one key)",
            max_session_duration=Duration.hours(1),
        )

    def _key(
        self,
        base: str,
        tenant: str,
        approver: str,
        generation: int,
        removal: RemovalPolicy,
        *,
        signer: iam.PolicyStatement | None,
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
            statements.append(signer)
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
        alias = approval_key_alias(self.alias_prefix, tenant, approver, generation)
        if len(alias) > ALIAS_MAX_LENGTH:
            raise ValueError(
                f"the alias of {approver}'s key for tenant {tenant} would be {len(alias)} "
                f"characters, KMS allows {ALIAS_MAX_LENGTH}: shorten the stack, tenant or "
                "approver name"
            )
        kms.Alias(self, f"{base}Alias{suffix}", alias_name=alias, target_key=key)
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
    def trusted_keys(self) -> dict[str, dict[str, object]]:
        """The APPROVAL_KEYS value: tenant -> approver -> generations or {current, retired}."""
        return {
            tenant: {approver: refs.variable() for approver, refs in approvers.items()}
            for tenant, approvers in self.approvers.items()
        }

    def key_arns(self, tenant: str | None = None) -> list[str]:
        """Every approval key's ARN (current and retired), or only `tenant`'s."""
        return [
            arn
            for name, approvers in self.approvers.items()
            if tenant is None or name == tenant
            for refs in approvers.values()
            for arn in (refs.current, *refs.retired)
        ]

    def grant_verify(self, grantee: iam.IGrantable) -> None:
        """GetPublicKey on every approval key (current and retired), nothing else."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(VERIFIER_ACTIONS), resources=self.key_arns())
        )

    def add_outputs(self, scope: Construct, thresholds: Mapping[str, Mapping[str, int]]) -> None:
        """`ApprovalKeys` and `ApproverRoles`: JSON tenant -> approver -> ARN; and
        `ApprovalThresholds`: JSON tenant -> currency -> minor units (four eyes above)."""
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
        CfnOutput(scope, "ApprovalThresholds", value=_json(thresholds))


def _json(value: object) -> str:
    # Tokens (ARNs known at deploy time) are embedded as strings and resolved by CloudFormation.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
