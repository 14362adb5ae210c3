"""Whose keys may sign approvals, and their public keys (docs/design.md §9).

Which key may sign for whom is trusted configuration (the stack's APPROVAL_KEYS variable),
never the case. The stack names the keys it creates by alias (`<prefix>/<tenant>/<approver>/
<generation>`, prefix in APPROVAL_KEY_ALIASES): their ARNs are deploy-time values, and aliases
keep the variable a few bytes per approver, so 50 approvers fit Lambda's 4 KB environment. A
key the configuration brings is named by its ARN. Each key is resolved and its public key
fetched from KMS by one GetPublicKey (which takes an alias and answers the key's ARN) once per
container and key, and kept for the life of the process, so a warm invocation makes no KMS
request; saga.approvals verifies with them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from saga import signatures
from saga.errors import TransientError

KEY_SPEC = "ECC_NIST_P256"
ALIAS_PREFIX = "alias/"
# Alias names: alias/ then letters, digits, "/", "_" and "-", at most 256 characters (KMS
# CreateAlias); a tenant or approver name is written with every other byte (and "_") as _xx.
ALIAS_MAX_LENGTH = 256


class ApprovalKeyUnavailable(RuntimeError):
    """A configured approval key cannot be used (missing, disabled, not an ECC_NIST_P256
    signing key, or this function may not read it): a deployment fault, not a business outcome,
    so deliberately not a SagaError: the execution fails and can be redriven after the fix."""


def _alias_part(text: str) -> str:
    return "".join(
        char
        if char.isascii() and (char.isalnum() or char == "-")
        else "".join(f"_{byte:02x}" for byte in char.encode())
        for char in text
    )


def approval_key_alias(prefix: str, tenant: str, approver: str, generation: int) -> str:
    """The alias of an approver's key of one generation (the stack creates it with the key)."""
    return f"{prefix}/{_alias_part(tenant)}/{_alias_part(approver)}/{generation}"


def is_alias(key: str) -> bool:
    return key.startswith(ALIAS_PREFIX) or ":alias/" in key


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


KeyRef = str | int  # a key ARN, or the generation of a key the stack created (an alias)


def _reference(value: Any, where: str, prefix: str | None, tenant: str, approver: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{where} must be a key ARN or a key generation")
    if isinstance(value, str):
        if not value:
            raise ValueError(f"{where} must be a key ARN or a key generation")
        return value
    if value < 1:
        raise ValueError(f"{where}: key generation {value} must be positive")
    if not prefix:
        raise ValueError(f"{where}: a key generation needs the stack's alias prefix")
    return approval_key_alias(prefix, tenant, approver, value)


def _approver_keys(tenant: str, approver: str, entry: Any, prefix: str | None) -> ApproverKeys:
    where = f"[{tenant!r}][{approver!r}]"
    if isinstance(entry, int) and not isinstance(entry, bool):
        entry = {"current": entry, "retired": list(range(1, entry))}
    if not isinstance(entry, Mapping):
        raise ValueError(
            f'{where} must be a key generation or {{"current": ..., "retired": [...]}}'
        )
    retired = entry.get("retired", [])
    if not isinstance(retired, list):
        raise ValueError(f"{where}.retired must be a list of key ARNs or generations")
    return ApproverKeys(
        _reference(entry.get("current"), f"{where}.current", prefix, tenant, approver),
        tuple(_reference(k, f"{where}.retired", prefix, tenant, approver) for k in retired),
    )


def parse_trusted_keys(
    raw: str | Mapping[str, Any], alias_prefix: str | None = None
) -> dict[str, dict[str, ApproverKeys]]:
    """APPROVAL_KEYS: `{"tenant": {"approver": ENTRY}}`, ENTRY `{"current": REF, "retired":
    [REF, ...]}` or `N` (the stack's keys of generations 1..N, N current); REF a key ARN or a
    generation, resolved through `alias_prefix`. Raises ValueError naming what is wrong."""
    value: Any = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, Mapping):
        raise ValueError('must be a JSON object {"tenant": {"approver": {"current": ARN}}}')
    trusted: dict[str, dict[str, ApproverKeys]] = {}
    for tenant, approvers in value.items():
        if not isinstance(approvers, Mapping):
            raise ValueError(f"[{tenant!r}] must map approvers to their keys")
        trusted[tenant] = {
            approver: _approver_keys(tenant, approver, entry, alias_prefix)
            for approver, entry in approvers.items()
        }
    return trusted


def trusted_keys_variable(trusted: Mapping[str, Mapping[str, Any]]) -> str:
    """The APPROVAL_KEYS value (what the stack sets), in a stable order and compact."""
    return json.dumps(trusted, sort_keys=True, separators=(",", ":"))


# --- public keys ---------------------------------------------------------------------------
class PublicKey(NamedTuple):
    key_arn: str  # what KMS answered for the key named (an alias resolves to its key)
    der: bytes  # the DER SubjectPublicKeyInfo of an ECC_NIST_P256 signing key


class PublicKeySource(Protocol):
    def public_key(self, key: str) -> PublicKey:
        """The key named by ARN, id or alias, and its public key."""
        ...


_KMS_TRANSIENT = {"ThrottlingException", "KMSInternalException", "DependencyTimeoutException"}


class KmsPublicKeys:
    """GetPublicKey through a KMS client made on first use (a container that never verifies
    never pays for the client), checking the key is what an approval key must be."""

    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self.client_factory = client_factory
        self._client: Any = None

    def public_key(self, key: str) -> PublicKey:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._client is None:
            self._client = self.client_factory()
        try:
            response = self._client.get_public_key(KeyId=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _KMS_TRANSIENT:
                raise TransientError(f"KMS did not answer GetPublicKey for {key}: {code}") from exc
            raise ApprovalKeyUnavailable(
                f"approval key {key} cannot be read ({code}): check the stack's approval "
                "keys (and their aliases) and this function's kms:GetPublicKey permission"
            ) from exc
        except BotoCoreError as exc:
            raise TransientError(f"KMS did not answer GetPublicKey for {key}: {exc}") from exc
        # KMS answers both names; moto only the older CustomerMasterKeySpec.
        spec = response.get("KeySpec") or response.get("CustomerMasterKeySpec")
        if spec != KEY_SPEC or response.get("KeyUsage") != "SIGN_VERIFY":
            raise ApprovalKeyUnavailable(
                f"approval key {key} is {spec}/{response.get('KeyUsage')}, not an "
                f"{KEY_SPEC} SIGN_VERIFY key"
            )
        named = str(response.get("KeyId") or key)
        return PublicKey(named, bytes(response["PublicKey"]))


class ResolvedKey(NamedTuple):
    key_arn: str
    point: signatures.Point
    der: bytes  # the public key as KMS gave it (load_public_key accepts one encoding only)


# Keys by (function, key as configured), for the life of the process: a Lambda container is
# one function, so this is one GetPublicKey per container and key. The function is part of the
# key because the local AWS runs every function in one process and must count the same way.
_KEYS: dict[tuple[str, str], ResolvedKey] = {}


def forget_public_keys() -> None:
    """Empty the cache (what a new container starts with)."""
    _KEYS.clear()


def resolve_key(keys: PublicKeySource, key: str, function: str) -> ResolvedKey:
    """The key configured as `key` (ARN or alias): its ARN and public key (a curve point and
    its DER), fetched once per function and key."""
    cached = _KEYS.get((function, key))
    if cached is None:
        found = keys.public_key(key)
        try:
            point = signatures.load_public_key(found.der)
        except signatures.InvalidPublicKey as exc:
            raise ApprovalKeyUnavailable(f"approval key {key}: {exc}") from None
        arn = (
            key if not is_alias(key) and key_uuid(found.key_arn) == key_uuid(key) else found.key_arn
        )
        cached = ResolvedKey(arn, point, found.der)
        _KEYS[(function, key)] = cached
    return cached
