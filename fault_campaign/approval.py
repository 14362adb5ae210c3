"""The approval step of a generated case, in one place: signed as `sagactl case approve` signs
against the local AWS (saga.approvals, docs/design.md §9), with the local approvers' keys; and the
four-eyes cases, above their tenant's threshold, signed by two distinct approvers or not.

The campaign's stack is cdk.json's plus one approver of the four-eyes tenant (`campaign_context`)
whose key holds the controller's key material under another key id: one key under two names, as
key material imported into two keys is (a multi-Region key and its replica are two ARNs of one
key id, which synth refuses; two key ids of one material, no configuration check can see). A
case the controller signs under both names is one person's: ValidateCase must count one.

The signature is ECDSA, randomized: two generations of one case carry different signature bytes
over the same signed fields, so a seed gives the same campaign up to those bytes (`comparable`).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from local_aws.approval_keys import co_sign_locally, create_key_of_material, sign_locally
from local_aws.emulator import DEFAULT_REGION, LOCAL_ACCOUNT_ID
from saga import formats
from saga.approvals import format_instant
from sagactl.paths import CDK_JSON

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
# The campaign's own approver of the four-eyes tenant: a key (brought, `key_arn`) holding the
# controller's key material (generation 1) under this key id.
TWO_NAMES_APPROVER = "treasurer@hooli"
TWO_NAMES_KEY_ID = "0badc0de-0039-4000-8000-000000000039"
TWO_NAMES_MATERIAL = (FOUR_EYES_TENANT, FOUR_EYES_APPROVERS[0], 1)
TWO_NAMES_KEY_ARN = f"arn:aws:kms:{DEFAULT_REGION}:{LOCAL_ACCOUNT_ID}:key/{TWO_NAMES_KEY_ID}"


# The campaign's tenant with a daily refund ceiling (docs/design.md §3.12), its approver and
# ceilings (minor units per UTC day): a few of its refunds fill a day, so the counter's refusal
# is met often; any other currency it refunds in is refused at ValidateCase (fail closed).
CEILING_TENANT = "vandelay"
CEILING_APPROVER = "finance@vandelay"
CEILINGS = {"USD": 10_000, "EUR": 8_000}


def campaign_context() -> dict[str, Any]:
    """What the campaign's stack changes in cdk.json's context (`-c` keys): the four-eyes
    tenant's third approver, signing with the controller's key material under another name,
    and a tenant of its own with a daily refund ceiling."""
    context = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    tenants = {tenant: list(approvers) for tenant, approvers in context["tenants"].items()}
    tenants[FOUR_EYES_TENANT].append(TWO_NAMES_APPROVER)
    tenants[CEILING_TENANT] = [CEILING_APPROVER]
    keys = {**context.get("approval_keys", {})}
    keys[f"{FOUR_EYES_TENANT}/{TWO_NAMES_APPROVER}"] = {"key_arn": TWO_NAMES_KEY_ARN}
    ceilings = {**context.get("refund_ceilings", {}), CEILING_TENANT: dict(CEILINGS)}
    return {"tenants": tenants, "approval_keys": keys, "refund_ceilings": ceilings}


@functools.cache
def campaign_ceilings() -> dict[str, dict[str, int]]:
    """The daily refund ceilings of the campaign's stack (tenant -> currency -> minor units)."""
    ceilings: dict[str, dict[str, int]] = campaign_context()["refund_ceilings"]
    return ceilings


def create_two_names_key(kms: Any, *, region: str = DEFAULT_REGION) -> str:
    """The third approver's key in a fresh local account (this process's moto KMS)."""
    return create_key_of_material(
        kms,
        key_id=TWO_NAMES_KEY_ID,
        material_of=TWO_NAMES_MATERIAL,
        account_id=LOCAL_ACCOUNT_ID,
        region=region,
    )


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
    "two-names": "ApprovalInvalid",  # one signer as two approvers: one key under two names
}


def four_eyes_case(
    rng: random.Random, raw: dict[str, Any]
) -> tuple[dict[str, Any], str, str | None]:
    """An above-threshold case signed one of the ways of `_FOUR_EYES_KINDS`."""
    _above_threshold(rng, raw)
    kind = rng.choices(tuple(_FOUR_EYES_KINDS)[:4], weights=(5, 2, 2, 2))[0]
    if kind == "twice" and rng.random() < 0.6:  # a last draw: the other kinds stay as drawn
        kind = "two-names"  # one person twice, the second time under another name
    case = approve(raw)
    first, second = FOUR_EYES_APPROVERS
    if kind == "two":
        case = co_sign(case, second)
    elif kind == "twice":
        case = co_sign(case, first)
    elif kind == "forged":
        case = co_sign(case, second)
        case["approval"]["co_signatures"][0]["signed_at"] = SIGNED_AT.replace("2026", "2027")
    elif kind == "two-names":
        # The controller signs again, as the third approver, with their own key material
        # under its other name: every signature verifies, one person made both.
        case = co_sign(case, TWO_NAMES_APPROVER, signer=TWO_NAMES_MATERIAL[:2])
        case["approval"]["co_signatures"][0]["key_id"] = TWO_NAMES_KEY_ARN
    return case, kind, _FOUR_EYES_KINDS[kind]
