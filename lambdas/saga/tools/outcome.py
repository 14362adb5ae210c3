"""RecordOutcome: the terminal case record and the execution output (docs/design.md §8)."""

from __future__ import annotations

from saga.cases import CaseRecords
from saga.models import OutcomePayload, OutcomeResult, approval_digest


def record_outcome(
    payload: OutcomePayload, *, cases: CaseRecords, execution_arn: str
) -> OutcomeResult:
    case = payload.case
    cases.record_outcome(
        case,
        approval_digest(case),
        execution_arn=execution_arn,
        outcome=payload.outcome,
        steps=payload.steps,
        compensations=payload.compensations,
        escalation=payload.escalation,
    )
    return OutcomeResult(
        case_id=case.case_id,
        outcome=payload.outcome,
        steps=payload.steps,
        compensations=payload.compensations,
        escalation=payload.escalation,
    )
