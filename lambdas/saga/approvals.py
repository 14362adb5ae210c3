"""Signed approvals: who approved a case, over exactly which parameters (docs/design.md §9).

An approval is signed by the approver's own asymmetric KMS key (ECC_NIST_P256, ECDSA_SHA_256).
The signed message is the canonical JSON of `{case_id, tenant_id, digest, revision, approved_by,
signed_at}` (plus `start_by` when the approval has a deadline), so a signature cannot be moved
to another case, tenant, revision, approver or parameter set: the digest covers the parameters.

Which key may sign for whom is trusted configuration (the stack's APPROVAL_KEYS variable), never
the case: `approval.key_id` only says which of the approver's configured keys signed, and a key
id that is not one of them is refused before anything is verified. A key configured by alias is
resolved to its ARN by the same request that fetches its public key. Verification is local: the
public key is fetched from KMS once per container and key (GetPublicKey) and kept for the life
of the process, so a warm invocation makes no KMS request.

A case above its tenant's four-eyes threshold (saga.four_eyes) carries one signature per approver
over the same digest: `approval`'s own and its `co_signatures`. What each tool accepts (every
signature verified, the distinct approvers counted, the case record) is saga.acceptance.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from saga import signatures
from saga.approval_keys import (
    ApprovalKeyUnavailable,
    ApproverKeys,
    PublicKeySource,
    TrustedKeys,
    is_alias,
    key_uuid,
    resolve_key,
)
from saga.errors import ApprovalInvalid, AuthorizationDenied, TransientError
from saga.four_eyes import Thresholds, approvals_required

APPROVE_HINT = "sign it with `sagactl case approve FILE`"
COSIGN_HINT = (
    "another approver of the tenant signs it too: `sagactl case approve FILE --as APPROVER` "
    "(a proposed case: `--case CASE_ID`)"
)
SIGNING_ALGORITHM = "ECDSA_SHA_256"
# The tags on an approver's key: whose it is (the local AWS gives it its identity from them).
TENANT_TAG = "saga:tenant"
APPROVER_TAG = "saga:approver"
GENERATION_TAG = "saga:key-generation"
# The approval fields the signature covers, besides the case's own identity.
SIGNED_FIELDS = ("case_id", "tenant_id", "digest", "revision", "approved_by", "signed_at")


# --- the message ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SignedApproval:
    """What an approval says, as the tools receive it (the case's identity and its approval)."""

    case_id: str
    tenant_id: str
    digest: str
    revision: int
    approved_by: str
    signed_at: str | None
    key_id: str | None
    signature: str | None
    start_by: str | None = None

    def message(self) -> bytes:
        """The bytes the approver signs."""
        return signed_message(
            case_id=self.case_id,
            tenant_id=self.tenant_id,
            digest=self.digest,
            revision=self.revision,
            approved_by=self.approved_by,
            signed_at=self.signed_at or "",
            start_by=self.start_by,
        )


def signed_message(
    *,
    case_id: str,
    tenant_id: str,
    digest: str,
    revision: int,
    approved_by: str,
    signed_at: str,
    start_by: str | None = None,
) -> bytes:
    """Canonical JSON (sorted keys, no whitespace, UTF-8) of the signed fields."""
    fields: dict[str, Any] = {
        "case_id": case_id,
        "tenant_id": tenant_id,
        "digest": digest,
        "revision": revision,
        "approved_by": approved_by,
        "signed_at": signed_at,
    }
    if start_by is not None:
        fields["start_by"] = start_by
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def parse_instant(value: str, what: str) -> datetime:
    """An ISO 8601 instant with a time zone (`2026-11-30T16:00:00Z`)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApprovalInvalid(
            f"approval.{what} must be an ISO 8601 time with a zone, got {value!r}"
        ) from None
    if parsed.tzinfo is None:
        raise ApprovalInvalid(f"approval.{what} must name its time zone (…Z), got {value!r}")
    return parsed.astimezone(UTC)


def format_instant(moment: datetime) -> str:
    """How an approval writes a time: ISO 8601, UTC, whole seconds (`2026-11-30T16:00:00Z`)."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CaseApprovals:
    """Every signature a case's approval carries, all over its one digest: the first signer's
    (the approval's own fields) and each co-signature (docs/design.md §9, four eyes)."""

    signatures: tuple[SignedApproval, ...]
    # What four eyes reads (saga.four_eyes): the refund the digest covers.
    currency: str
    amount_minor: int

    @property
    def first(self) -> SignedApproval:
        return self.signatures[0]

    @property
    def case_id(self) -> str:
        return self.first.case_id

    @property
    def tenant_id(self) -> str:
        return self.first.tenant_id

    @property
    def digest(self) -> str:
        return self.first.digest

    def approvers(self) -> tuple[str, ...]:
        """Who signed, each once, in the order they appear."""
        return tuple(dict.fromkeys(s.approved_by for s in self.signatures))

    def start_by(self) -> str | None:
        """The deadline in force: the earliest of the signatures' `start_by`, if any has one."""
        deadlines = [s.start_by for s in self.signatures if s.start_by is not None]
        if not deadlines:
            return None
        return min(deadlines, key=lambda value: parse_instant(value, "start_by"))


# --- verification --------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifiedKey:
    """The trusted key a signature verified with: its ARN and its public key (DER
    SubjectPublicKeyInfo), which says whose it is whatever its name (a multi-Region key and its
    replica are two ARNs of one key)."""

    arn: str
    public_key: bytes


class ApprovalVerifier:
    """Checks an approval's signature against the keys trusted for its tenant and approver, and
    knows the tenants' four-eyes thresholds (trusted configuration too).
    `function` scopes the cache of public keys: each function fetches a key once, as its own
    container would, also where the local AWS runs every function in one process."""

    def __init__(
        self,
        trusted: TrustedKeys,
        keys: PublicKeySource,
        function: str = "",
        *,
        thresholds: Thresholds,
    ) -> None:
        self.trusted = trusted
        self.keys = keys
        self.function = function
        self.thresholds = thresholds

    def required(self, approvals: CaseApprovals) -> int:
        """How many distinct approvers the case needs under the thresholds configured now."""
        return approvals_required(
            self.thresholds, approvals.tenant_id, approvals.currency, approvals.amount_minor
        )

    def verify(
        self, approval: SignedApproval, *, accept_retired: bool, now: datetime | None = None
    ) -> VerifiedKey:
        """The trusted key whose signature `approval` carries, or a typed refusal:
        AuthorizationDenied when the approver or the key is not this tenant's approver's,
        ApprovalInvalid when the approval is unsigned, malformed, expired (with `now`, the
        start deadline is checked) or its signature does not verify over this case."""
        approvers = self.trusted.get(approval.tenant_id)
        if approvers is None or approval.approved_by not in approvers:
            raise AuthorizationDenied(
                f"{approval.approved_by!r} may not approve cases for tenant {approval.tenant_id!r}"
            )
        where = f"case {approval.case_id}"
        require_signature(approval)
        assert approval.signed_at and approval.key_id and approval.signature
        parse_instant(approval.signed_at, "signed_at")
        if now is not None and approval.start_by is not None:
            deadline = parse_instant(approval.start_by, "start_by")
            if now.astimezone(UTC) > deadline:
                raise ApprovalInvalid(
                    f"{where}: the approval allowed starting until {approval.start_by}; "
                    f"it has passed: re-approve the case ({APPROVE_HINT})"
                )
        key = self._trusted_key(approval, approvers[approval.approved_by], accept_retired)
        signature = _decode_signature(approval.signature, where)
        resolved = resolve_key(self.keys, key, self.function)
        if signatures.verify(resolved.point, approval.message(), signature):
            return VerifiedKey(self._arn(key), resolved.der)
        other = self._signer_among_others(approval, signature, key)
        if other is not None:
            raise AuthorizationDenied(
                f"{where}: signed by {other[1]!r} of tenant {other[0]!r}, presented as "
                f"{approval.approved_by!r}"
            )
        raise ApprovalInvalid(
            f"{where}: the signature of {approval.approved_by!r} does not verify over this "
            f"case (the case or its approval changed after signing); {APPROVE_HINT}"
        )

    def _trusted_key(
        self, approval: SignedApproval, keys: ApproverKeys, accept_retired: bool
    ) -> str:
        """The trusted key (as configured) that `approval.key_id` names. A key configured by
        alias is resolved to compare (the current one before any retired one), each once per
        container."""
        named = key_uuid(approval.key_id or "")
        if self._is(keys.current, named, strict=True):
            return keys.current
        for retired in keys.retired:
            if self._is(retired, named, strict=True):
                if accept_retired:
                    return retired
                raise ApprovalInvalid(
                    f"case {approval.case_id}: signed with {approval.approved_by!r}'s retired "
                    f"key {self._arn(retired)}; a new case needs the current key: {APPROVE_HINT}"
                )
        owner = self._owner_of(named)
        whose = f"a key of {owner[1]!r} of tenant {owner[0]!r}" if owner else "not a trusted key"
        raise AuthorizationDenied(
            f"case {approval.case_id}: key {approval.key_id!r} is {whose}, not a key of "
            f"{approval.approved_by!r} for tenant {approval.tenant_id!r}"
        )

    def _is(self, key: str, named: str, *, strict: bool) -> bool:
        """Whether the configured `key` is the key id `named`. Strict: a key that cannot be
        resolved raises (a deployment fault); else it simply is not the one."""
        if not is_alias(key):
            return key_uuid(key) == named
        try:
            return key_uuid(self._arn(key)) == named
        except (ApprovalKeyUnavailable, TransientError):
            if strict:
                raise
            return False

    def _owner_of(self, named: str) -> tuple[str, str] | None:
        """Whose configured key `named` is, to say so in a refusal (only on that path)."""
        for tenant, approvers in self.trusted.items():
            for approver, keys in approvers.items():
                if any(self._is(k, named, strict=False) for k in (keys.current, *keys.retired)):
                    return tenant, approver
        return None

    def _signer_among_others(
        self, approval: SignedApproval, signature: bytes, tried: str
    ) -> tuple[str, str] | None:
        """Whose configured key (other than the one tried) made this signature, if any: only
        on the refusal path, to say "signed by another approver" rather than "invalid"."""
        message = approval.message()
        for tenant, approvers in self.trusted.items():
            for approver, keys in approvers.items():
                for key in (keys.current, *keys.retired):
                    if key == tried:
                        continue
                    try:
                        point = self._point(key)
                    except (ApprovalKeyUnavailable, TransientError):
                        continue  # cannot say who signed; the refusal stands either way
                    if signatures.verify(point, message, signature):
                        return tenant, approver
        return None

    def _arn(self, key: str) -> str:
        """The configured key's ARN (an alias resolved; a key ARN as it is, asking nothing)."""
        return key if not is_alias(key) else resolve_key(self.keys, key, self.function).key_arn

    def _point(self, key: str) -> signatures.Point:
        return resolve_key(self.keys, key, self.function).point


def require_signature(approval: SignedApproval | CaseApprovals | Any) -> None:
    """ApprovalInvalid unless every signature of the approval carries its signature, key and
    time (given a SignedApproval, CaseApprovals, or a case that has them)."""
    if hasattr(approval, "signed_approvals"):
        approval = approval.signed_approvals()
    signed = approval.signatures if isinstance(approval, CaseApprovals) else (approval,)
    for signature in signed:
        missing = [n for n in ("signed_at", "key_id", "signature") if not getattr(signature, n)]
        if missing:
            raise ApprovalInvalid(
                f"case {signature.case_id}: the approval is not signed (no "
                f"{', '.join(missing)}); {APPROVE_HINT}"
            )


def _decode_signature(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ApprovalInvalid(
            f"{where}: approval.signature is not base64; {APPROVE_HINT}"
        ) from None
