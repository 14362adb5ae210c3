"""ReconcileStep: settle an uncertain forward step by asking its downstream. Never dispatches.

The answer is recorded in the ledger: found -> COMPLETED with the downstream's receipt (RESUME);
provably absent -> the step may be re-attempted with the same key inside the budget (RETRY);
cannot tell -> the record stays UNKNOWN and a person decides (ESCALATE). A recorded permanent
failure is raised again as the recorded business error, which the workflow routes as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from saga.identity import Operation
from saga.ledger import ActionLedger, Attempt, Reconciliation
from saga.models import Case, ReconcileResult, Step
from saga.tools.common import action_request, step_result

Decision = Literal["RESUME", "RETRY", "ESCALATE"]
_DECISIONS: tuple[Decision, ...] = ("RESUME", "RETRY", "ESCALATE")


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
    decision = _as_decision(answer.decision)
    return ReconcileResult(
        step=step,
        decision=decision,
        reason=answer.reason,
        result=step_result(answer.outcome) if answer.outcome is not None else None,
        attempts=answer.attempts,
        budget=answer.budget,
    )


def _as_decision(value: str) -> Decision:
    for decision in _DECISIONS:
        if value == decision:
            return decision
    raise ValueError(f"the ledger returned an unknown reconcile decision {value!r}")
