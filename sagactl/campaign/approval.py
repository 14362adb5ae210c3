"""The approval step of a generated case, in one place: signed as `sagactl case approve` signs
against the local AWS (saga.approvals, docs/design.md §9), with the local approvers' keys.

The signature is ECDSA, randomized: two generations of one case carry different signature bytes
over the same signed fields, so a seed gives the same campaign up to those bytes (`comparable`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from saga.approvals import format_instant
from sagactl.local.approval_keys import sign_locally

# A digest that no parameters have: for cases that must be refused before any digest matters.
UNAPPROVABLE_DIGEST = "sha256:" + "0" * 64
# Every generated case is signed at this instant: what the signature covers is a function of the
# seed. A start deadline after it and before the local clock's now has passed.
SIGNED_AT = format_instant(datetime(2026, 1, 1, tzinfo=UTC))
PASSED_DEADLINE = format_instant(datetime(2026, 1, 2, tzinfo=UTC))
_SIGNATURE_FIELDS = ("signature", "key_id")


def approve(
    case: Mapping[str, Any],
    *,
    signer: tuple[str, str] | None = None,
    start_by: str | None = None,
) -> dict[str, Any]:
    """The case with its approval digest and signature, as the approver would sign it
    (`signer`: someone else's key, presented as the case's approver)."""
    return sign_locally(case, signed_at=SIGNED_AT, signer=signer, start_by=start_by)


def unapproved(case: Mapping[str, Any]) -> dict[str, Any]:
    """A case that cannot be approved (its fields do not validate): a placeholder approval."""
    approved = dict(case)
    approved["approval"] = {**dict(case.get("approval") or {}), "digest": UNAPPROVABLE_DIGEST}
    return approved


def comparable(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case without its signature bytes (randomized), for comparing two generations."""
    plain = copy.deepcopy(dict(case))
    for name in _SIGNATURE_FIELDS:
        (plain.get("approval") or {}).pop(name, None)
    return plain
