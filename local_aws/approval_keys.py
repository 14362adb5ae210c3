"""The local AWS's approval keys: deterministic, public, and for the local AWS only.

On AWS every approver's key is created by KMS and its private half never leaves it. Locally the
keys are created in moto's KMS from the synthesized template like every other resource, and
then given a known origin: the key id and the private scalar of "approver A of tenant T,
generation G" are derived from a public seed (this file). That is what lets `examples/` ship
signed cases that verify in any fresh local AWS, and tests sign cases without a KMS round trip.
Anybody can compute these private keys: a signature made with one proves nothing anywhere but
in the local AWS, whose keys these are; the stack on AWS never trusts them (its keys are KMS's).

`sagactl case approve FILE` signs through KMS Sign in both places; locally moto signs with the
derived key, so its signatures and `sign_locally`'s verify alike.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from saga.approval_keys import KEY_SPEC
from saga.approvals import (
    APPROVER_TAG,
    GENERATION_TAG,
    SIGNING_ALGORITHM,
    TENANT_TAG,
    format_instant,
    signed_message,
)

logger = logging.getLogger(__name__)

LOCAL_KEY_SEED = "replacement-order-saga/local-approval-key/v1"
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://replacement-order-saga.invalid/local-keys")
_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551  # P-256's n


def _seed(tenant: str, approver: str, generation: int) -> str:
    return f"{LOCAL_KEY_SEED}/{tenant}/{approver}/{generation}"


def local_key_id(tenant: str, approver: str, generation: int = 1) -> str:
    """The KMS key id the local AWS gives this approver's key."""
    return str(uuid.uuid5(_NAMESPACE, _seed(tenant, approver, generation)))


def local_key_arn(
    tenant: str,
    approver: str,
    generation: int = 1,
    *,
    region: str = "us-east-1",
    account_id: str = "123456789012",
) -> str:
    return f"arn:aws:kms:{region}:{account_id}:key/{local_key_id(tenant, approver, generation)}"


def local_private_scalar(tenant: str, approver: str, generation: int = 1) -> int:
    digest = hashlib.sha256(_seed(tenant, approver, generation).encode("utf-8")).digest()
    return int.from_bytes(digest, "big") % (_ORDER - 1) + 1


def local_private_key(tenant: str, approver: str, generation: int = 1) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.derive_private_key(local_private_scalar(tenant, approver, generation), ec.SECP256R1())


def local_public_key_der(tenant: str, approver: str, generation: int = 1) -> bytes:
    from cryptography.hazmat.primitives import serialization

    der: bytes = (
        local_private_key(tenant, approver, generation)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return der


def sign_locally(
    case: Mapping[str, Any],
    *,
    approved_by: str | None = None,
    signed_at: str | None = None,
    start_by: str | None = None,
    generation: int = 1,
    signer: tuple[str, str] | None = None,
    region: str = "us-east-1",
) -> dict[str, Any]:
    """A copy of `case` with its digest and a signature by the local key of its approver (or of
    `approved_by`), as `sagactl case approve` makes it against the local AWS. `signer` (tenant,
    approver) signs with someone else's key instead (for tests of refusals). Any co-signature
    the case carried is dropped: this is the first signature."""
    from saga.models import approval_digest

    approval = dict(case.get("approval") or {})
    approval.pop("co_signatures", None)
    if approved_by is not None:
        approval["approved_by"] = approved_by
    approval["digest"] = approval_digest({**case, "approval": approval})
    approval.pop("start_by", None)
    approval |= _local_signature(
        case,
        approval,
        approver=str(approval["approved_by"]),
        signed_at=signed_at,
        start_by=start_by,
        generation=generation,
        signer=signer,
        region=region,
    )
    return {**case, "approval": approval}


def co_sign_locally(
    case: Mapping[str, Any],
    *,
    approved_by: str,
    signed_at: str | None = None,
    start_by: str | None = None,
    generation: int = 1,
    signer: tuple[str, str] | None = None,
    region: str = "us-east-1",
) -> dict[str, Any]:
    """A copy of a signed `case` with `approved_by`'s co-signature added over the same digest
    (four eyes, docs/design.md §9), as a second `sagactl case approve FILE --as` makes it."""
    approval = dict(case["approval"])
    mine = {"approved_by": approved_by}
    mine |= _local_signature(
        case,
        approval,
        approver=approved_by,
        signed_at=signed_at,
        start_by=start_by,
        generation=generation,
        signer=signer,
        region=region,
    )
    approval["co_signatures"] = [*approval.get("co_signatures", []), mine]
    return {**case, "approval": approval}


def _local_signature(
    case: Mapping[str, Any],
    approval: Mapping[str, Any],
    *,
    approver: str,
    signed_at: str | None,
    start_by: str | None,
    generation: int,
    signer: tuple[str, str] | None,
    region: str,
) -> dict[str, Any]:
    """`{signed_at, start_by?, key_id, signature}` of `approver` over the approval's digest and
    revision, made with the local key of `signer` (default: the approver's own)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    fields: dict[str, Any] = {"signed_at": signed_at or format_instant(datetime.now(UTC))}
    if start_by is not None:
        fields["start_by"] = start_by
    signer_tenant, signer_approver = signer or (str(case["tenant_id"]), approver)
    message = signed_message(
        case_id=str(case["case_id"]),
        tenant_id=str(case["tenant_id"]),
        digest=str(approval["digest"]),
        revision=int(approval["revision"]),
        approved_by=approver,
        signed_at=fields["signed_at"],
        start_by=start_by,
    )
    private = local_private_key(signer_tenant, signer_approver, generation)
    signature = private.sign(message, ec.ECDSA(hashes.SHA256()))
    fields["key_id"] = local_key_arn(signer_tenant, signer_approver, generation, region=region)
    fields["signature"] = base64.b64encode(signature).decode("ascii")
    return fields


# --- provisioning ------------------------------------------------------------------------------
def create_local_key(
    kms: Any,
    *,
    tenant: str,
    approver: str,
    generation: int = 1,
    account_id: str = "123456789012",
    region: str = "us-east-1",
    description: str = "",
) -> str:
    """Create an approver's key in this process's moto KMS with its local identity and tags;
    returns its ARN (the local AWS's provisioning, and tests that use moto directly)."""
    created = kms.create_key(
        KeySpec=KEY_SPEC,
        KeyUsage="SIGN_VERIFY",
        Description=description or f"Approval signing key of {approver} for tenant {tenant}",
    )["KeyMetadata"]["KeyId"]
    key_id = pin_local_key(
        str(created),
        tenant=tenant,
        approver=approver,
        generation=generation,
        account_id=account_id,
        region=region,
    )
    tags = {TENANT_TAG: tenant, APPROVER_TAG: approver, GENERATION_TAG: str(generation)}
    kms.tag_resource(
        KeyId=key_id, Tags=[{"TagKey": key, "TagValue": value} for key, value in tags.items()]
    )
    return f"arn:aws:kms:{region}:{account_id}:key/{key_id}"


def pin_local_key(
    created_key_id: str,
    *,
    tenant: str,
    approver: str,
    generation: int,
    account_id: str,
    region: str,
) -> str:
    """Give a key just created in this process's moto KMS its local identity and private key;
    returns its key id. A moto server in another process cannot be reached: its key keeps the
    random identity moto gave it (signing still works; `examples/` then do not verify)."""
    return _pin(
        created_key_id,
        key_id=local_key_id(tenant, approver, generation),
        private=local_private_key(tenant, approver, generation),
        account_id=account_id,
        region=region,
    )


def create_key_of_material(
    kms: Any,
    *,
    key_id: str,
    material_of: tuple[str, str, int],
    account_id: str = "123456789012",
    region: str = "us-east-1",
) -> str:
    """A key in this process's moto KMS holding the local key material of (tenant, approver,
    generation) under another key id `key_id`: one key material under two names, as the same
    material imported into two keys gives (and a multi-Region replica, under its primary's
    id). Returns its ARN. For the campaign's "one signer, two names" cases."""
    created = kms.create_key(
        KeySpec=KEY_SPEC, KeyUsage="SIGN_VERIFY", Description=f"Key material of {material_of}"
    )["KeyMetadata"]["KeyId"]
    _pin(
        str(created),
        key_id=key_id,
        private=local_private_key(*material_of),
        account_id=account_id,
        region=region,
    )
    return f"arn:aws:kms:{region}:{account_id}:key/{key_id}"


def _pin(created_key_id: str, *, key_id: str, private: Any, account_id: str, region: str) -> str:
    from moto.kms.models import kms_backends

    backend = kms_backends[account_id][region]
    key = backend.keys.get(created_key_id)
    if key is None:
        logger.warning(
            "approval key %s is not in this process's KMS: it keeps a random identity",
            created_key_id,
        )
        return created_key_id
    del backend.keys[created_key_id]
    key.id = key_id
    key.arn = f"arn:aws:kms:{region}:{account_id}:key/{key_id}"
    # moto keeps the cryptography key on its ECDSA wrapper; the base type does not declare it.
    key.private_key.private_key = private  # type: ignore[attr-defined]
    backend.keys[key_id] = key
    return key_id


__all__ = [
    "LOCAL_KEY_SEED",
    "SIGNING_ALGORITHM",
    "co_sign_locally",
    "create_key_of_material",
    "create_local_key",
    "local_key_arn",
    "local_key_id",
    "local_private_key",
    "local_public_key_der",
    "pin_local_key",
    "sign_locally",
]


_KEY_ARN_MARK = "_saga_answers_key_arn"


def install_get_public_key_arn() -> None:
    """GetPublicKey answers the key's ARN as its KeyId, as KMS does (moto answers the bare key
    id): the tools resolve an alias with it and report the key they verified with (idempotent)."""
    import json

    from moto.kms.models import kms_backends
    from moto.kms.responses import KmsResponse

    from local_aws.patching import wrap_once

    def wrap(original: Any) -> Any:
        def get_public_key(self: KmsResponse) -> str:
            answer = json.loads(original(self))
            backend = kms_backends[self.current_account][self.region]
            answer["KeyId"] = backend.describe_key(answer["KeyId"]).arn
            return json.dumps(answer)

        return get_public_key

    wrap_once(KmsResponse, "get_public_key", _KEY_ARN_MARK, wrap)
