"""ValidateCase: validate, authorize, verify the signed approval, record the case, derive ids.

Nothing here trusts the case for *who* may act: the tenant's approvers come from trusted
configuration (TENANTS), their keys too (APPROVAL_KEYS), never from the input or from model
output. Only after all checks pass is anything written, so a rejected case has no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from saga import clock as saga_clock
from saga.approvals import ApprovalVerifier, accept_new_case, parse_instant
from saga.cases import CaseRecords, OwningExecution
from saga.errors import AuthorizationDenied
from saga.models import Case, ValidateResult, approval_digest, parse_case, verify_approval
from saga.tools.common import case_actions


def authorize(case: Case, tenants: Mapping[str, frozenset[str]]) -> None:
    approvers = tenants.get(case.tenant_id)
    if approvers is None:
        raise AuthorizationDenied(f"tenant {case.tenant_id!r} is not configured for this saga")
    if case.approval.approved_by not in approvers:
        raise AuthorizationDenied(
            f"{case.approval.approved_by!r} may not approve cases for tenant {case.tenant_id!r}"
        )


def validate_case(
    raw_case: Any,
    *,
    tenants: Mapping[str, frozenset[str]],
    cases: CaseRecords,
    execution: OwningExecution,
    approvals: ApprovalVerifier,
) -> ValidateResult:
    """The validated case; `duplicate` when another execution already owns this case (its own
    retries and redrives pass: the case record binds the owning execution)."""
    case = parse_case(raw_case)
    authorize(case, tenants)
    verify_approval(case)
    accept_new_case(approvals, case.signed_approval(), started=_started(execution))
    owner = cases.create(case, approval_digest(case), execution)
    if owner == execution:
        return ValidateResult(case=case.to_json(), actions=case_actions(case))
    return ValidateResult(
        case=case.to_json(),
        actions=case_actions(case),
        duplicate=True,
        original_execution_arn=owner.arn if owner is not None else None,
    )


def _started(execution: OwningExecution) -> datetime:
    """When the execution started (its start time survives retries and redrives); now when
    the state machine did not say."""
    if execution.started_at:
        return parse_instant(execution.started_at, "the execution's start time")
    return datetime.fromtimestamp(saga_clock.now(), UTC)
