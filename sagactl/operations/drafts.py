"""Cases an agent proposed (saga.agent.drafts) on a target: the drafts table, who approves a
draft, and its approval signed and stored on it (`sagactl case approve --case`,
docs/design.md §10).

The approval is signed exactly as a case file's (sagactl.operations.signing.sign_case: KMS Sign
with the approver's key and the caller's credentials), then stored with one conditional write:
only if the draft still has the digest that was shown and no approval yet.
"""

from __future__ import annotations

from typing import Any

from saga.agent.drafts import DraftConflict, DraftStore, draft_case
from saga.errors import InvalidRequest
from saga.models import with_approval_digest
from sagactl.errors import DraftApprovalRefused, NotFound, SagactlError, UsageError
from sagactl.operations.signing import sign_case, stack_approval_keys
from sagactl.target import Target
from sagactl.views.approval import shown

DRAFTS_OUTPUT = "DraftsTableName"
LEGACY_DRAFTS_OUTPUT = "LegacyDraftsTableName"


def draft_store(target: Target) -> DraftStore:
    """The drafts (both tables, saga.agent.drafts); SagactlError for a stack that predates the
    agent tools or drafts keyed by tenant."""
    drafts = target.newer_output(DRAFTS_OUTPUT, "the agent tools", SagactlError)
    legacy = target.newer_output(LEGACY_DRAFTS_OUTPUT, "drafts keyed by tenant", SagactlError)
    return DraftStore(target.client("dynamodb"), drafts, legacy_table_name=legacy)


def open_draft(target: Target, case_id: str) -> dict[str, Any]:
    """The proposed case `case_id`, not approved yet; NotFound or DraftApprovalRefused."""
    draft = draft_store(target).get(case_id)
    if draft is None:
        raise NotFound(f"no proposed case {case_id} in the drafts tables")
    if draft.get("approval"):
        raise DraftApprovalRefused(
            f"case {case_id} was approved already by "
            f"{shown(draft['approval'].get('approved_by'))} at {shown(draft.get('approved_at'))}; "
            "nothing changed"
        )
    return draft


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
    """Sign `case` (case_to_sign's, as shown) and store the approval on the draft, only if it
    is still the draft that was shown; the approval stored."""
    case_id = str(draft["case_id"])
    signed = sign_case(target, case, now=target.now_utc(), start_by=start_by)
    approval: dict[str, Any] = signed["approval"]
    try:
        draft_store(target).approve(case_id, digest=draft["digest"], approval=approval)
    except DraftConflict as exc:
        raise DraftApprovalRefused(f"{exc}; nothing stored") from None
    return approval
