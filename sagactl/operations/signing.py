"""Sign a case's approval with the approver's KMS key, with the caller's credentials, and
verify a signature with the keys the deployed functions trust.

The approval's signature is made by KMS Sign (ECDSA_SHA_256) over the canonical message of
saga.approvals, with the key the stack's `ApprovalKeys` output names for that approver of the
case's tenant: on AWS only the approver's principal may call Sign on it (CloudTrail's Sign event
records who), in the local AWS any credentials may (its keys are public: sagactl.local.
approval_keys). Verification, here for `sagactl case check --deployed` as in the tools, is
saga.approvals.ApprovalVerifier with the deployed functions' APPROVAL_KEYS.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from saga.approval_keys import KmsPublicKeys
from saga.approvals import SIGNING_ALGORITHM, ApprovalVerifier, format_instant, signed_message
from saga.models import Case, approval_digest
from sagactl.config import Tenants
from sagactl.errors import NotAnApprover, NotFound, SagactlError, SigningRefused
from sagactl.operations.functions import deployed_approval_keys
from sagactl.target import Target

APPROVAL_KEYS_OUTPUT = "ApprovalKeys"
APPROVER_ROLES_OUTPUT = "ApproverRoles"


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


def stack_tenants(target: Target) -> Tenants:
    """Who may approve for which tenant in the stack, from its ApprovalKeys output (one key per
    approver of each tenant ValidateCase's TENANTS names): no request beyond the outputs."""
    keys = stack_approval_keys(target)
    where = "the local AWS" if target.local else f"stack {target.stack_name}"
    return Tenants(
        {
            str(tenant): frozenset(str(approver) for approver in approvers)
            for tenant, approvers in keys.items()
            if isinstance(approvers, dict)
        },
        f"the ApprovalKeys output of {where}",
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
    """A copy of the (validated) case with digest, signed_at, key_id and signature filled in."""
    approval = dict(case["approval"])
    tenant, approver = str(case["tenant_id"]), str(approval["approved_by"])
    key = approver_key(target, tenant, approver)
    approval["digest"] = approval_digest({**case, "approval": approval})
    approval["signed_at"] = format_instant(now)
    approval.pop("start_by", None)
    if start_by is not None:
        approval["start_by"] = start_by
    message = signed_message(
        case_id=str(case["case_id"]),
        tenant_id=tenant,
        digest=approval["digest"],
        revision=int(approval["revision"]),
        approved_by=approver,
        signed_at=approval["signed_at"],
        start_by=approval.get("start_by"),
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
    approval["key_id"] = str(response.get("KeyId") or key)
    approval["signature"] = base64.b64encode(response["Signature"]).decode("ascii")
    return {**case, "approval": approval}


def verify_deployed_signature(target: Target, case: Case) -> str:
    """ValidateCase's signature check (saga.approvals) with the deployed keys, at the target's
    now: a sentence on success; ApprovalInvalid or AuthorizationDenied as ValidateCase would
    raise them."""
    name, trusted = deployed_approval_keys(target)
    verifier = ApprovalVerifier(trusted, KmsPublicKeys(lambda: target.client("kms")))
    key = verifier.verify(case.signed_approval(), accept_retired=False, now=target.now_utc())
    return f"signed with {key}, trusted by {name}"
