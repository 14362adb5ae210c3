"""The approval step of a generated case, in one place: signed as `sagactl case approve` signs
against the local AWS (saga.approvals, docs/design.md §9), with the local approvers' keys; and the
four-eyes cases, above their tenant's threshold, signed by two distinct approvers or not.

The signature is ECDSA, randomized: two generations of one case carry different signature bytes
over the same signed fields, so a seed gives the same campaign up to those bytes (`comparable`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from saga import formats
from saga.approvals import format_instant
from sagactl.local.approval_keys import co_sign_locally, sign_locally

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
    (`signer`: someone else's key, presented as the case's approver), and co-signed again by
    each approver who co-signed it before (four eyes: approved anew as it was approved)."""
    co_signers = [co["approved_by"] for co in (case.get("approval") or {}).get("co_signatures", [])]
    approved = sign_locally(case, signed_at=SIGNED_AT, signer=signer, start_by=start_by)
    for approver in co_signers:
        approved = co_sign(approved, approver)
    return approved


def co_sign(
    case: Mapping[str, Any], approver: str, *, signer: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The signed case with `approver`'s co-signature over the same digest (four eyes,
    docs/design.md §9); `signer`: made with someone else's key."""
    return co_sign_locally(case, approved_by=approver, signed_at=SIGNED_AT, signer=signer)


def unapproved(case: Mapping[str, Any]) -> dict[str, Any]:
    """A case that cannot be approved (its fields do not validate): a placeholder approval."""
    approved = dict(case)
    approved["approval"] = {**dict(case.get("approval") or {}), "digest": UNAPPROVABLE_DIGEST}
    return approved


def comparable(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case without its signature bytes (randomized), for comparing two generations."""
    plain = copy.deepcopy(dict(case))
    approval = plain.get("approval") or {}
    for signed in (approval, *approval.get("co_signatures", [])):
        for name in _SIGNATURE_FIELDS:
            signed.pop(name, None)
    return plain


# Four eyes as cdk.json configures it: the tenant's approvers and thresholds (minor units).
FOUR_EYES_TENANT = "hooli"
FOUR_EYES_APPROVERS = ("controller@hooli", "cfo@hooli")
FOUR_EYES_THRESHOLDS = {"USD": 100_000, "EUR": 100_000, "GBP": 80_000, "JPY": 150_000}


# --- four eyes (docs/design.md §9) --------------------------------------------------------------
def _above_threshold(rng: random.Random, raw: dict[str, Any]) -> None:
    """Make `raw` a case of the four-eyes tenant whose refund needs two approvers: above its
    currency's threshold, or in a currency without one (fail closed)."""
    raw["tenant_id"] = FOUR_EYES_TENANT
    raw["approval"]["approved_by"] = FOUR_EYES_APPROVERS[0]
    if rng.random() < 0.25:
        others = sorted(formats.CURRENCY_CODES - set(FOUR_EYES_THRESHOLDS))
        raw["refund"]["currency"] = rng.choice(others)
        return
    currency = rng.choice(sorted(FOUR_EYES_THRESHOLDS))
    limit = FOUR_EYES_THRESHOLDS[currency]
    raw["refund"]["currency"] = currency
    raw["refund"]["amount_minor"] = rng.choice((limit + 1, rng.randint(limit + 1, 100 * limit)))


# How an above-threshold case is signed, and the rejection it must meet (None: accepted).
_FOUR_EYES_KINDS: dict[str, str | None] = {
    "two": None,  # two distinct approvers
    "once": "ApprovalInvalid",  # one approver
    "twice": "ApprovalInvalid",  # one approver, twice
    "forged": "ApprovalInvalid",  # a co-signature changed after signing
}


def four_eyes_case(
    rng: random.Random, raw: dict[str, Any]
) -> tuple[dict[str, Any], str, str | None]:
    """An above-threshold case signed one of the ways of `_FOUR_EYES_KINDS`."""
    _above_threshold(rng, raw)
    kind = rng.choices(tuple(_FOUR_EYES_KINDS), weights=(5, 2, 2, 2))[0]
    case = approve(raw)
    first, second = FOUR_EYES_APPROVERS
    if kind == "two":
        case = co_sign(case, second)
    elif kind == "twice":
        case = co_sign(case, first)
    elif kind == "forged":
        case = co_sign(case, second)
        case["approval"]["co_signatures"][0]["signed_at"] = SIGNED_AT.replace("2026", "2027")
    return case, kind, _FOUR_EYES_KINDS[kind]
