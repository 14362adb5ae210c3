"""Four eyes above a threshold (docs/design.md §9): how many distinct approvers a case needs.

A tenant may have a threshold per currency, in minor units (APPROVAL_THRESHOLDS, trusted
configuration from cdk.json's `approval_thresholds`, never the case). A refund above its
currency's threshold needs the signatures of two distinct approvers of the tenant over the same
digest. A tenant with thresholds fails closed: a currency it names no threshold for needs two,
so a case cannot switch currency to skip four eyes. A tenant without thresholds needs one
signature, as before four eyes existed.

The count is decided when ValidateCase accepts the case and kept on its case record
(`approvals_required`): the tools after it read the record, so a threshold changed while a case
is under way never strands it (nor lets it through with fewer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.formats import major_units, minor_units_by_tenant

ONE_APPROVER = 1
FOUR_EYES = 2  # two distinct approvers

Thresholds = Mapping[str, Mapping[str, int]]  # tenant -> currency -> minor units
RECORD_FIELD = "approvals_required"  # on the case record


def approvals_required(
    thresholds: Thresholds, tenant_id: str, currency: str, amount_minor: int
) -> int:
    """How many distinct approvers of `tenant_id` must sign a refund of `amount_minor` in
    `currency`: two above the currency's threshold, or for a currency a tenant with thresholds
    names none for (fail closed); else one."""
    limits = thresholds.get(tenant_id)
    if not limits:
        return ONE_APPROVER
    limit = limits.get(currency)
    if limit is None:
        return FOUR_EYES
    return FOUR_EYES if amount_minor > limit else ONE_APPROVER


def case_approvals_required(thresholds: Thresholds, case: Any) -> int:
    """`approvals_required` for a case (a parsed Case)."""
    refund = case.refund
    return approvals_required(thresholds, case.tenant_id, refund.currency, refund.amount_minor)


def recorded_approvals_required(record: Mapping[str, Any] | None) -> int:
    """The count ValidateCase decided for a case, from its record: one for a case recorded
    before four eyes existed (it was accepted on one signature, under the rules of its day)."""
    value = record.get(RECORD_FIELD) if record is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < ONE_APPROVER:
        return ONE_APPROVER
    return int(value)


def parse_thresholds(raw: str | Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """`{"tenant": {"CUR": minor units}}`; ValueError naming what is wrong."""
    return minor_units_by_tenant(raw, "thresholds")


def threshold_text(thresholds: Thresholds, tenant_id: str, currency: str) -> str:
    """Why a case of this tenant and currency needs what it needs, in words for a person."""
    limits = thresholds.get(tenant_id)
    if not limits:
        return f"tenant {tenant_id} has no four-eyes threshold"
    limit = limits.get(currency)
    if limit is None:
        return (
            f"tenant {tenant_id} has no threshold for {currency}: every {currency} refund "
            "needs two approvers"
        )
    return (
        f"tenant {tenant_id}'s threshold for {currency} is {limit} minor units "
        f"({major_units(limit, currency)} {currency})"
    )


def progress_text(given: int, required: int) -> str:
    """`1 of 2 approvals`."""
    return f"{min(given, required)} of {required} approval{'' if required == 1 else 's'}"


# --- the approval's shape with several signers (docs/design.md §8) ---------------------------
# The fields of one signer: the approval's own (the first signer), or one co-signature.
SIGNER_FIELDS = ("approved_by", "signed_at", "start_by", "key_id", "signature")


def signatures_of(approval: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The signatures an approval (as JSON) carries: the first signer's, if signed, then each
    co-signature."""
    if not approval:
        return []
    first = {name: approval[name] for name in SIGNER_FIELDS if name in approval}
    signed = [first] if approval.get("signature") else []
    return signed + [dict(co) for co in approval.get("co_signatures") or ()]


def signers(approval: Mapping[str, Any] | None) -> list[str]:
    """Who signed an approval, each once, in order (names as written: unverified)."""
    return list(dict.fromkeys(str(s.get("approved_by")) for s in signatures_of(approval)))


def with_signature(
    signatures: list[dict[str, Any]], mine: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The signatures with `mine` in place of its signer's earlier one (where it stood), else
    after the others: one signature per approver."""
    by_signer: dict[Any, dict[str, Any]] = {}
    for signature in [*signatures, mine]:
        signer = signature.get("approved_by")
        mine_now = signer == mine["approved_by"]
        by_signer.setdefault(signer, dict(mine) if mine_now else dict(signature))
    return list(by_signer.values())


def approval_with(revision: int, digest: str, signatures: list[dict[str, Any]]) -> dict[str, Any]:
    """The approval (as JSON) carrying `signatures` over `digest`: the first signer's fields as
    the approval's own (a one-signer approval reads as ever), the others as `co_signatures`."""
    first, *others = signatures
    approval: dict[str, Any] = {"revision": revision, "approved_by": first["approved_by"]}
    approval["digest"] = digest
    approval |= {name: first[name] for name in SIGNER_FIELDS[1:] if name in first}
    if others:
        approval["co_signatures"] = others
    return approval
