"""ReconcileStep: settle an uncertain forward step by asking its downstream. Never dispatches.

The answer is recorded in the ledger: found -> COMPLETED with the downstream's receipt (RESUME);
provably absent -> the step may be re-attempted with the same key inside the budget (RETRY);
cannot tell -> the record stays UNKNOWN and a person decides (ESCALATE). A recorded permanent
failure is raised again as the recorded business error, which the workflow routes as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from saga.identity import Operation, action_request
from saga.ledger import ActionLedger, Attempt, ReconcileAnswer, Reconciliation
from saga.models import Case, ReconcileResult, Step, StepResult

# The ledger's answer as the state machine's Choice state spells it.
_ASL_DECISION: dict[ReconcileAnswer, Literal["RESUME", "RETRY", "ESCALATE"]] = {
    ReconcileAnswer.RESUME: "RESUME",
    ReconcileAnswer.RETRY: "RETRY",
    ReconcileAnswer.ESCALATE: "ESCALATE",
}


def reconcile_action(
    case: Case,
    step: Step,
    attempt: Attempt,
    *,
    execution_arn: str | None,
    ledger: ActionLedger,
    reconcile: Callable[[], Reconciliation],
    reattempt_window_seconds: float | None = None,
) -> ReconcileResult:
    """`reattempt_window_seconds`: how long the step's downstream deduplicates a repeat (the
    payment provider's key retention; None when its lookup sees every request)."""
    request = action_request(case, Operation(step), execution_arn=execution_arn)
    answer = ledger.reconcile(
        request, attempt, reconcile=reconcile, reattempt_window_seconds=reattempt_window_seconds
    )
    return ReconcileResult(
        step=step,
        decision=_ASL_DECISION[answer.decision],
        reason=answer.reason,
        result=StepResult.of(answer.outcome) if answer.outcome is not None else None,
        attempts=answer.attempts,
        budget=answer.budget,
    )
