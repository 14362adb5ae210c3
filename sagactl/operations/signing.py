"""Sign a case's approval with the approver's KMS key, with the caller's credentials, and
verify a signature with the keys the deployed functions trust.

The approval's signature is made by KMS Sign (ECDSA_SHA_256) over the canonical message of
saga.approvals, with the key the stack's `ApprovalKeys` output names for that approver of the
case's tenant: on AWS only the approver's principal may call Sign on it (CloudTrail's Sign event
records who), in the local AWS any credentials may (its keys are public: local_aws.
approval_keys). Verification, here for `sagactl case check --deployed` as in the tools, is
saga.approvals.ApprovalVerifier with the deployed functions' APPROVAL_KEYS.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from saga.acceptance import accept_new_case
from saga.approvals import SIGNING_ALGORITHM, format_instant, signed_message
from saga.four_eyes import approval_with, parse_thresholds
from saga.models import Case, approval_digest
from sagactl.config import Tenants
from sagactl.errors import NotAnApprover, NotFound, SagactlError, SigningRefused
from sagactl.operations.functions import deployed_verifier
from sagactl.target import Target

APPROVAL_KEYS_OUTPUT = "ApprovalKeys"
APPROVER_ROLES_OUTPUT = "ApproverRoles"
APPROVAL_THRESHOLDS_OUTPUT = "ApprovalThresholds"


def _json_output(target: Target, key: str) -> dict[str, Any]:
    raw = target.newer_output(key, "signed approvals", NotFound)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise SagactlError(f"the {key} output is not JSON: {raw[:80]!r}") from None
    if not isinstance(value, dict):
        raise SagactlError(f"the {key} output is not a JSON object")
    return value


def stack_approval_keys(target: Target) -> dict[str, Any]:
    """The stack's ApprovalKeys output: tenant -> approver -> the ARN of the current key."""
    return _json_output(target, APPROVAL_KEYS_OUTPUT)


def stack_thresholds(target: Target) -> dict[str, dict[str, int]]:
    """The stack's four-eyes thresholds (its ApprovalThresholds output; a stack deployed before
    four eyes has none)."""
    raw = target.optional_output(APPROVAL_THRESHOLDS_OUTPUT)
    if raw is None:
        return {}
    try:
        return parse_thresholds(raw)
    except ValueError as exc:
        raise SagactlError(f"the {APPROVAL_THRESHOLDS_OUTPUT} output: {exc}") from None


def stack_tenants(target: Target) -> Tenants:
    """Who may approve for which tenant in the stack, from its ApprovalKeys output (one key per
    approver of each tenant ValidateCase's TENANTS names), and the four-eyes thresholds from its
    ApprovalThresholds output: no request beyond the outputs."""
    keys = stack_approval_keys(target)
    where = "the local AWS" if target.local else f"stack {target.stack_name}"
    return Tenants(
        {
            str(tenant): frozenset(str(approver) for approver in approvers)
            for tenant, approvers in keys.items()
            if isinstance(approvers, dict)
        },
        f"the ApprovalKeys output of {where}",
        stack_thresholds(target),
    )


def approver_key(target: Target, tenant: str, approver: str) -> str:
    """The ARN of `approver`'s current signing key for `tenant`, from the stack's outputs."""
    keys = stack_approval_keys(target)
    approvers = keys.get(tenant)
    if not isinstance(approvers, dict):
        raise NotAnApprover(
            f"tenant {tenant!r} is not configured for this saga (tenants: "
            f"{', '.join(sorted(keys))})"
        )
    key = approvers.get(approver)
    if not isinstance(key, str):
        raise NotAnApprover(
            f"{approver!r} is not an approver of tenant {tenant!r} in this stack (its "
            f"approvers: {', '.join(sorted(approvers))}): pass --as APPROVER"
        )
    return key


def approver_role(target: Target, tenant: str, approver: str) -> str | None:
    try:
        roles = _json_output(target, APPROVER_ROLES_OUTPUT)
    except SagactlError:
        return None
    role = (roles.get(tenant) or {}).get(approver)
    return role if isinstance(role, str) else None


def sign_case(
    target: Target,
    case: dict[str, Any],
    *,
    now: datetime,
    start_by: str | None = None,
) -> dict[str, Any]:
    """A copy of the (validated) case with digest, signed_at, key_id and signature filled in:
    the approval signed by its `approved_by` alone."""
    signature = sign_approval(
        target, case, approver=str(case["approval"]["approved_by"]), now=now, start_by=start_by
    )
    approval = approval_with(int(case["approval"]["revision"]), approval_digest(case), [signature])
    return {**case, "approval": approval}


def sign_approval(
    target: Target,
    case: dict[str, Any],
    *,
    approver: str,
    now: datetime,
    start_by: str | None = None,
) -> dict[str, Any]:
    """`approver`'s signature over the case's digest and revision (KMS Sign with their key,
    with the caller's credentials): `{approved_by, signed_at, start_by?, key_id, signature}`,
    the fields of one signer (docs/design.md §9)."""
    tenant = str(case["tenant_id"])
    revision = int(case["approval"]["revision"])
    key = approver_key(target, tenant, approver)
    digest = approval_digest(case)
    signed: dict[str, Any] = {"approved_by": approver, "signed_at": format_instant(now)}
    if start_by is not None:
        signed["start_by"] = start_by
    message = signed_message(
        case_id=str(case["case_id"]),
        tenant_id=tenant,
        digest=digest,
        revision=revision,
        approved_by=approver,
        signed_at=signed["signed_at"],
        start_by=start_by,
    )
    try:
        response = target.client("kms").sign(
            KeyId=key, Message=message, MessageType="RAW", SigningAlgorithm=SIGNING_ALGORITHM
        )
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in {"AccessDeniedException", "AccessDenied"}:
            role = approver_role(target, tenant, approver)
            how = (
                f"assume the approver role {role} (for example a profile with role_arn and "
                "mfa_serial) and run this again"
                if role
                else "use the credentials of the principal the configuration names for this "
                "approver"
            )
            raise SigningRefused(
                f"KMS refused to sign as {approver} for tenant {tenant} with these "
                f"credentials: {how}"
            ) from None
        raise
    signed["key_id"] = str(response.get("KeyId") or key)
    signed["signature"] = base64.b64encode(response["Signature"]).decode("ascii")
    return signed


def verify_deployed_signature(target: Target, case: Case) -> str:
    """ValidateCase's signature check (saga.acceptance.accept_new_case) with the deployed keys
    and thresholds, at the target's now: a sentence on success; ApprovalInvalid or
    AuthorizationDenied as ValidateCase would raise them."""
    name, verifier = deployed_verifier(target)
    accepted = accept_new_case(verifier, case.signed_approvals(), started=target.now_utc())
    return f"signed with {', '.join(accepted.keys)}, trusted by {name}"
