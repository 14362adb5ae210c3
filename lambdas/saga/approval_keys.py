"""Whose keys may sign approvals, and their public keys (docs/design.md §9).

Which key may sign for whom is trusted configuration (the stack's APPROVAL_KEYS variable),
never the case. The public key of each is fetched from KMS once per container and key
(GetPublicKey) and kept for the life of the process, so a warm invocation makes no KMS request;
saga.approvals verifies with them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from saga import signatures
from saga.errors import TransientError

KEY_SPEC = "ECC_NIST_P256"


class ApprovalKeyUnavailable(RuntimeError):
    """A configured approval key cannot be used (missing, disabled, not an ECC_NIST_P256
    signing key, or this function may not read it): a deployment fault, not a business outcome,
    so deliberately not a SagaError: the execution fails and can be redriven after the fix."""


# --- trusted configuration -------------------------------------------------------------------
@dataclass(frozen=True)
class ApproverKeys:
    """One approver's keys: the one that signs new approvals and the retired ones."""

    current: str
    retired: tuple[str, ...] = ()


TrustedKeys = Mapping[str, Mapping[str, ApproverKeys]]  # tenant -> approver -> keys


def key_uuid(key: str) -> str:
    """The key id part of a key ARN (or the id itself): what identifies a key across the ARN's
    spelling (an approval names its key by ARN or by id)."""
    return key.rsplit("/", 1)[-1] if key.startswith("arn:") else key


def parse_trusted_keys(raw: str | Mapping[str, Any]) -> dict[str, dict[str, ApproverKeys]]:
    """APPROVAL_KEYS: `{"tenant": {"approver": {"current": ARN, "retired": [ARN, ...]}}}`.
    Raises ValueError naming what is wrong."""
    value: Any = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, Mapping):
        raise ValueError('must be a JSON object {"tenant": {"approver": {"current": ARN}}}')
    trusted: dict[str, dict[str, ApproverKeys]] = {}
    for tenant, approvers in value.items():
        if not isinstance(approvers, Mapping):
            raise ValueError(f"[{tenant!r}] must map approvers to their keys")
        trusted[tenant] = {}
        for approver, keys in approvers.items():
            current = keys.get("current") if isinstance(keys, Mapping) else None
            retired = keys.get("retired", []) if isinstance(keys, Mapping) else None
            if not isinstance(current, str) or not current:
                raise ValueError(f"[{tenant!r}][{approver!r}].current must be a key ARN")
            if not isinstance(retired, list) or not all(isinstance(k, str) for k in retired):
                raise ValueError(f"[{tenant!r}][{approver!r}].retired must be a list of key ARNs")
            trusted[tenant][approver] = ApproverKeys(current, tuple(retired))
    return trusted


def trusted_keys_variable(trusted: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """The APPROVAL_KEYS value (what the stack sets), in a stable order."""
    return json.dumps(trusted, sort_keys=True, separators=(",", ":"))


# --- public keys ---------------------------------------------------------------------------
class PublicKeySource(Protocol):
    def public_key(self, key_arn: str) -> bytes:
        """The DER SubjectPublicKeyInfo of an ECC_NIST_P256 signing key."""
        ...


_KMS_TRANSIENT = {"ThrottlingException", "KMSInternalException", "DependencyTimeoutException"}


class KmsPublicKeys:
    """GetPublicKey through a KMS client made on first use (a container that never verifies
    never pays for the client), checking the key is what an approval key must be."""

    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self.client_factory = client_factory
        self._client: Any = None

    def public_key(self, key_arn: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._client is None:
            self._client = self.client_factory()
        try:
            response = self._client.get_public_key(KeyId=key_arn)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _KMS_TRANSIENT:
                raise TransientError(
                    f"KMS did not answer GetPublicKey for {key_arn}: {code}"
                ) from exc
            raise ApprovalKeyUnavailable(
                f"approval key {key_arn} cannot be read ({code}): check the stack's approval "
                "keys and this function's kms:GetPublicKey permission"
            ) from exc
        except BotoCoreError as exc:
            raise TransientError(f"KMS did not answer GetPublicKey for {key_arn}: {exc}") from exc
        # KMS answers both names; moto only the older CustomerMasterKeySpec.
        spec = response.get("KeySpec") or response.get("CustomerMasterKeySpec")
        if spec != KEY_SPEC or response.get("KeyUsage") != "SIGN_VERIFY":
            raise ApprovalKeyUnavailable(
                f"approval key {key_arn} is {spec}/{response.get('KeyUsage')}, not an "
                f"{KEY_SPEC} SIGN_VERIFY key"
            )
        return bytes(response["PublicKey"])


# Public keys by (function, key ARN), for the life of the process: a Lambda container is one
# function, so this is one GetPublicKey per container and key. The function is part of the
# key because the local AWS runs every function in one process and must count the same way.
_POINTS: dict[tuple[str, str], signatures.Point] = {}


def forget_public_keys() -> None:
    """Empty the cache (what a new container starts with)."""
    _POINTS.clear()


def public_point(keys: PublicKeySource, key_arn: str, function: str) -> signatures.Point:
    """The public key `key_arn` as a curve point, fetched once per function and key."""
    cached = _POINTS.get((function, key_arn))
    if cached is None:
        try:
            cached = signatures.load_public_key(keys.public_key(key_arn))
        except signatures.InvalidPublicKey as exc:
            raise ApprovalKeyUnavailable(f"approval key {key_arn}: {exc}") from None
        _POINTS[(function, key_arn)] = cached
    return cached
