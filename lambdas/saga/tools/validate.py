"""ValidateCase: validate, authorize, verify the signed approval, record the case, derive ids.

Nothing here trusts the case for *who* may act: the tenant's approvers come from trusted
configuration (the approvers of APPROVAL_KEYS, with their keys), never from the input or model
output. Only after all checks pass is anything written, so a rejected case has no effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from saga import clock as saga_clock
from saga.acceptance import accept_new_case
from saga.approvals import ApprovalVerifier
from saga.cases import CaseRecords, OwningExecution
from saga.ceilings import Ceilings, check_within_ceiling
from saga.errors import ApprovalInvalid, AuthorizationDenied, DuplicateExecution, InvalidRequest
from saga.four_eyes import ONE_APPROVER
from saga.identity import Operation, action_request, in_agent_namespace
from saga.models import (
    ActionRef,
    Case,
    CaseActions,
    ValidateResult,
    approval_digest,
    parse_case,
    verify_approval,
)

if TYPE_CHECKING:
    from saga.agent.drafts import DraftStore


def authorize(case: Case, tenants: Mapping[str, frozenset[str]]) -> None:
    """The tenant is configured and everyone who signed (the approver, each co-signer) is one of
    its approvers."""
    approvers = tenants.get(case.tenant_id)
    if approvers is None:
        raise AuthorizationDenied(f"tenant {case.tenant_id!r} is not configured for this saga")
    for signer in case.signed_approvals().approvers():
        if signer not in approvers:
            raise AuthorizationDenied(
                f"{signer!r} may not approve cases for tenant {case.tenant_id!r}"
            )


def checked_case(
    raw_case: Any,
    tenants: Mapping[str, frozenset[str]],
    verify_signature: Callable[[Case], None],
    case_rules: Callable[[Case], None] | None = None,
) -> Case:
    """A case checked in the one order every entry point uses (ValidateCase, `sagactl start`,
    `sagactl case check`; docs/design.md §8): its fields (InvalidRequest), its tenant and
    approver (AuthorizationDenied), its approval digest (ApprovalMismatch), then its signature,
    as `verify_signature` checks it there. So a case is refused for the same first reason
    wherever it is checked, and the advice that reason gives is the right one. `case_rules`
    (ValidateCase's, for the deployment's payment provider: InvalidRequest) follow the fields."""
    case = parse_case(raw_case)
    if case_rules is not None:
        case_rules(case)
    authorize(case, tenants)
    verify_approval(case)
    verify_signature(case)
    return case


def require_agents_draft(case: Case, drafts: DraftStore, cases: CaseRecords) -> None:
    """A new case under an agent's case id (`agt_<tenant>_...`, or `agt-...` from before ids
    carried the tenant) is a draft of its tenant, as the agent tools start it: InvalidRequest
    otherwise, before anything is written (docs/design.md §10). The agent roles read every case
    under their ids (§11), so no other case may run under one: another tenant's ordinary case
    id that happens to begin `agt-` would hand its customer's address to every agent. "New":
    no case record of this tenant holds the id yet; a case that ran under it (its DUPLICATE, a
    later revision, a case from before this rule) goes on as before. One GetItem of the draft
    per agent case, and of the case record only when there is no such draft."""
    if not in_agent_namespace(case.case_id):
        return
    draft = drafts.get(case.case_id)  # None for an id no draft can have (saga.agent.drafts)
    if draft is not None and draft.get("tenant_id") == case.tenant_id:
        return
    record = cases.get(case.case_id)
    if record is not None and record.get("tenant_id") == case.tenant_id:
        return
    raise InvalidRequest(
        f"case id {case.case_id} is an agent's case id (agt_<tenant>_... or agt-<32 hex "
        f"digits>) and no draft of tenant {case.tenant_id} holds it: only the agent tools start "
        "cases under these ids; choose another case id"
    )


def validate_case(
    raw_case: Any,
    *,
    tenants: Mapping[str, frozenset[str]],
    cases: CaseRecords,
    execution: OwningExecution,
    approvals: ApprovalVerifier,
    drafts: DraftStore,
    ceilings: Ceilings,
    case_rules: Callable[[Case], None] | None = None,
) -> ValidateResult:
    """The validated case; DuplicateExecution when another execution already owns this case
    (its own retries and redrives pass: the case record binds the owning execution). A refund
    above its tenant's daily ceiling (docs/design.md §3.12) is refused for good, before
    anything is reserved: AuthorizationDenied with the numbers."""

    required = ONE_APPROVER  # how many approvers the case needs, as accepted now

    def verify_signature(case: Case) -> None:
        nonlocal required
        try:
            # The deadline is read on the saga's clock, not against the start time in the
            # input: a direct invoke could claim any start time.
            accepted = accept_new_case(approvals, case.signed_approvals(), started=_now())
            required = accepted.required
        except (ApprovalInvalid, AuthorizationDenied):
            # Accepted before, with exactly these parameters: a redrive of this execution after
            # the deadline, a key rotation or a threshold change goes on (its record keeps the
            # count it was accepted with); a new execution is a DUPLICATE (§8).
            if not cases.accepted(case, approval_digest(case)):
                raise

    case = checked_case(raw_case, tenants, verify_signature, case_rules)
    require_agents_draft(case, drafts, cases)
    digest = approval_digest(case)
    refund = case.refund
    try:
        check_within_ceiling(ceilings, case.tenant_id, refund.currency, refund.amount_minor)
    except AuthorizationDenied:
        # Accepted before with these parameters, the ceiling lowered since: its own execution
        # goes on (IssueRefund's charge refuses it; the reservation is released, the case
        # escalated), a new one is a DUPLICATE.
        if not cases.accepted(case, digest):
            raise
    # Written with the record, once: a case accepted before keeps the count on its record.
    owner = cases.create(case, digest, execution, approvals_required=required)
    if owner == execution:
        return ValidateResult(case=case.to_json(), actions=case_actions(case))
    # Nothing is dispatched: the workflow ends SUCCEEDED with the DUPLICATE outcome (§4.1).
    raise DuplicateExecution.of(case.case_id, owner.arn if owner is not None else None)


def case_actions(case: Case) -> CaseActions:
    """The ids and keys of the case's actions, as the state machine carries them."""
    refs = {
        operation: ActionRef(action_id=request.action_id, action_key=request.key)
        for operation in Operation
        for request in (action_request(case, operation),)
    }
    return CaseActions(
        reserve=refs[Operation.RESERVE],
        refund=refs[Operation.REFUND],
        ship=refs[Operation.SHIP],
        release=refs[Operation.RELEASE],
    )


def _now() -> datetime:
    return datetime.fromtimestamp(saga_clock.now(), UTC)
