"""Cases an agent proposed (saga.agent.drafts) on a target: the drafts table, who approves a
draft, and its approval signed and stored on it (`sagactl case approve --case`,
docs/design.md §10).

The approval is signed exactly as a case file's (sagactl.operations.signing: KMS Sign with the
approver's key and the caller's credentials), then stored with one conditional write: only if
the draft still has the digest that was shown and no approval yet; or, where four eyes asks for
a second approver (docs/design.md §9), added to the approval as its co-signature, only if the
draft still has that digest, someone else's approval and no co-signature yet.
"""

from __future__ import annotations

from typing import Any

from saga.agent.drafts import DraftConflict, DraftStore, draft_case
from saga.errors import InvalidRequest
from saga.four_eyes import approvals_required, progress_text, signatures_of, threshold_text
from saga.models import with_approval_digest
from sagactl.errors import DraftApprovalRefused, NotFound, SagactlError, UsageError
from sagactl.operations.signing import (
    sign_approval,
    sign_case,
    stack_approval_keys,
    stack_thresholds,
)
from sagactl.target import Target
from sagactl.views.approval import Signing, shown

DRAFTS_OUTPUT = "DraftsTableName"
LEGACY_DRAFTS_OUTPUT = "LegacyDraftsTableName"


def draft_store(target: Target) -> DraftStore:
    """The drafts (both tables, saga.agent.drafts); SagactlError for a stack that predates the
    agent tools or drafts keyed by tenant."""
    drafts = target.newer_output(DRAFTS_OUTPUT, "the agent tools", SagactlError)
    legacy = target.newer_output(LEGACY_DRAFTS_OUTPUT, "drafts keyed by tenant", SagactlError)
    return DraftStore(target.client("dynamodb"), drafts, legacy_table_name=legacy)


def open_draft(target: Target, case_id: str) -> dict[str, Any]:
    """The proposed case `case_id`; NotFound."""
    draft = draft_store(target).get(case_id)
    if draft is None:
        raise NotFound(f"no proposed case {case_id} in the drafts tables")
    return draft


def draft_signing(target: Target, draft: dict[str, Any]) -> Signing:
    """Four eyes for the draft (docs/design.md §9): how many distinct approvers its refund
    needs under the stack's thresholds, why, and who signed it already."""
    thresholds = stack_thresholds(target)
    tenant, refund = str(draft["tenant_id"]), draft["parameters"]["refund"]
    currency, amount = str(refund["currency"]), int(refund["amount_minor"])
    signed = [
        (str(s.get("approved_by")), str(s.get("signed_at")))
        for s in signatures_of(draft.get("approval"))
    ]
    return Signing(
        approvals_required(thresholds, tenant, currency, amount),
        threshold_text(thresholds, tenant, currency),
        signed,
    )


def refuse_signed(draft: dict[str, Any], signing: Signing, approver: str | None) -> None:
    """DraftApprovalRefused for a draft that has all the approvals it needs, or `approver`'s
    already: one signature per approver."""
    case_id = draft["case_id"]
    names = [name for name, _ in signing.signed]
    if names and len(names) >= signing.required:
        raise DraftApprovalRefused(
            f"case {case_id} was approved already by {' and '.join(map(shown, names))} at "
            f"{shown(draft.get('co_signed_at') or draft.get('approved_at'))}; nothing changed"
        )
    if approver is not None and approver in names:
        raise DraftApprovalRefused(
            f"case {case_id}: {shown(approver)} approved it already "
            f"({progress_text(len(names), signing.required)}): another approver of tenant "
            f"{draft['tenant_id']} approves it with `sagactl case approve --case {case_id} --as "
            "APPROVER`; nothing changed"
        )


def default_approver(target: Target, tenant: str) -> str:
    """The tenant's approver when it has exactly one in this stack; else --as is needed."""
    approvers = sorted((stack_approval_keys(target).get(tenant) or {}).keys())
    if len(approvers) != 1:
        raise UsageError(
            f"tenant {tenant!r} has approvers {', '.join(approvers) or 'none'} in this stack: "
            "say which one you are with --as APPROVER"
        )
    return str(approvers[0])


def case_to_sign(draft: dict[str, Any], approver: str) -> dict[str, Any]:
    """The case `approver` would sign for this draft, checked before it is shown or anyone is
    asked: a valid case by the case's own rules (saga.models) whose digest is the draft's.
    DraftApprovalRefused otherwise (a draft is written by an agent's tool: not trusted)."""
    case_id = str(draft.get("case_id"))
    try:
        case = draft_case(draft)
        case["approval"] = {"revision": case["approval"]["revision"], "approved_by": approver}
        checked = with_approval_digest(case)
    except (InvalidRequest, KeyError, TypeError, ValueError) as exc:
        why = exc if isinstance(exc, InvalidRequest) else "it lacks a field a case needs"
        raise DraftApprovalRefused(
            f"case {shown(case_id)}: the draft is not a valid case ({why}); nothing signed"
        ) from None
    if checked["approval"]["digest"] != draft["digest"]:
        raise DraftApprovalRefused(
            f"case {shown(case_id)}: the draft's digest does not match its parameters; "
            "nothing signed"
        )
    return case


def approve_draft(
    target: Target,
    draft: dict[str, Any],
    case: dict[str, Any],
    *,
    start_by: str | None,
) -> dict[str, Any]:
    """Sign `case` (case_to_sign's, as shown) and store the signature on the draft, only if it
    is still the draft that was shown: the approval, or (four eyes) a co-signature added to it.
    The approval as stored."""
    case_id = str(draft["case_id"])
    approver = str(case["approval"]["approved_by"])
    store = draft_store(target)
    try:
        if not draft.get("approval"):
            approval: dict[str, Any] = sign_case(
                target, case, now=target.now_utc(), start_by=start_by
            )["approval"]
            store.approve(case_id, digest=draft["digest"], approval=approval)
            return approval
        signature = sign_approval(
            target, case, approver=approver, now=target.now_utc(), start_by=start_by
        )
        store.co_sign(case_id, digest=draft["digest"], signature=signature)
    except DraftConflict as exc:
        raise DraftApprovalRefused(f"{exc}; nothing stored") from None
    return {**draft["approval"], "co_signatures": [signature]}
