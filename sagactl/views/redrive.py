"""What a redrive would rerun, and when it cannot help (docs/design.md §6).

Redrive (Step Functions RedriveExecution) reruns the failed state with the input and variables
it had, with fresh Retry counters; the states that succeeded are not rerun. Every rerun reuses
the execution's action keys, so the ledger's lifetime attempt budget (the one counter a redrive
cannot reset) decides whether a rerun can still dispatch: with no budget left it would only end
in BudgetExhausted, so it is refused; so is a rerun of a case a person resolved (§3.10), and of
a case ValidateCase rejected (it reruns the rejection: the same input fails the same way, and
the failed-execution rule queues one more message each time).
Pure: sagactl.operations.redrive reads what these rules judge, and sends the redrive.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sagactl.errors import RedriveRefused
from sagactl.views.case import (
    STOPPED_STATUSES,
    ActionView,
    rejected_at_validation,
    rejection_text,
)
from sagactl.views.timeline import FailedStep

REDRIVE_WINDOW_SECONDS = 14 * 86400
REDRIVABLE_STATUSES = STOPPED_STATUSES


@dataclass
class RedrivePlan:
    case_id: str
    execution_arn: str
    status: str
    stopped_at: str | None
    redrive_count: int
    failed_step: FailedStep | None
    actions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "execution_arn": self.execution_arn,
            "status": self.status,
            "stopped_at": self.stopped_at,
            "redrive_count": self.redrive_count,
            "failed_state": self.failed_step.state if self.failed_step else None,
            "failed_error": self.failed_step.error if self.failed_step else None,
            "failed_cause": self.failed_step.cause if self.failed_step else None,
            "actions": self.actions,
        }


def check_redrivable(case_id: str, description: dict[str, Any]) -> None:
    """RedriveRefused unless the execution stopped and Step Functions has not ruled it out."""
    status = str(description["status"])
    if status not in REDRIVABLE_STATUSES:
        hint = {
            "RUNNING": "it is still RUNNING; wait for it (`sagactl watch`)",
            "SUCCEEDED": "it SUCCEEDED; there is nothing to rerun",
            "PENDING_REDRIVE": "a redrive is already pending",
        }.get(status, f"it is {status}")
        raise RedriveRefused(
            f"case {case_id}: redrive reruns only FAILED, TIMED_OUT or ABORTED executions; {hint}"
        )
    # Step Functions judges on its own clock; check_window covers a service that says nothing.
    if description.get("redriveStatus") == "NOT_REDRIVABLE":
        raise RedriveRefused(
            f"case {case_id}: Step Functions says NOT_REDRIVABLE: "
            f"{description.get('redriveStatusReason', 'no reason given')}"
        )


def check_not_rejected(
    case_id: str, description: dict[str, Any], failed: FailedStep | None
) -> None:
    """RedriveRefused when ValidateCase rejected the case: a rerun repeats the rejection."""
    if rejected_at_validation(failed):
        raise RedriveRefused(
            f"{rejection_text(case_id, description)}. A redrive would only reject it again "
            "(and queue one more escalation message)"
        )


def check_window(case_id: str, description: dict[str, Any], now: float) -> None:
    """RedriveRefused when the execution closed longer ago than Step Functions redrives."""
    stop = description.get("stopDate")
    stopped_epoch = stop.timestamp() if isinstance(stop, datetime) else None
    if stopped_epoch is not None and now - stopped_epoch > REDRIVE_WINDOW_SECONDS:
        days = (now - stopped_epoch) / 86400
        raise RedriveRefused(
            f"case {case_id}: the execution closed {days:.0f} days ago; Step Functions redrives "
            "only within 14 days of the close. Reconcile the open actions and start a new case"
        )


def new_plan(case_id: str, description: dict[str, Any], failed: FailedStep | None) -> RedrivePlan:
    stop = description.get("stopDate")
    return RedrivePlan(
        case_id=case_id,
        execution_arn=str(description["executionArn"]),
        status=str(description["status"]),
        stopped_at=stop.isoformat() if isinstance(stop, datetime) else None,
        redrive_count=int(description.get("redriveCount", 0) or 0),
        failed_step=failed,
    )


def check_not_resolved(case_id: str, record: Mapping[str, Any] | None) -> None:
    """RedriveRefused when a person resolved the case: who and when, never the decision's text
    (case data stays out of errors; `sagactl escalations show` shows it)."""
    resolution = (record or {}).get("resolution")
    if isinstance(resolution, Mapping):
        raise RedriveRefused(
            f"case {case_id} was resolved by {resolution.get('by')} at {resolution.get('at')}: a "
            "person's decision is final, and a rerun would end in ActionSettled without doing "
            f"anything (`sagactl escalations show {case_id}` shows the decision)"
        )


def judge_redrive(
    case_id: str,
    record: Mapping[str, Any] | None,
    description: dict[str, Any],
    failed: FailedStep | None,
    action: tuple[str, dict[str, Any] | None] | None,
    *,
    budget: int,
    now: float,
) -> RedrivePlan:
    """What a redrive would rerun, from what was read: the case record, the execution, its
    failed step and that step's action (`(key, record_summary or None)`; None when the step
    runs no ledger action). RedriveRefused when it cannot help. One verdict for `redrive`,
    `escalations` and `status` alike."""
    check_not_resolved(case_id, record)
    check_redrivable(case_id, description)
    check_not_rejected(case_id, description, failed)
    check_window(case_id, description, now)
    plan = new_plan(case_id, description, failed)
    if failed is not None and failed.operation and action is not None:
        key, summary = action
        plan.actions.append(planned_action(failed.operation, key, summary, budget))
    refuse_spent_actions(plan)
    return plan


def redrive_verdict(
    case_id: str,
    record: Mapping[str, Any] | None,
    description: dict[str, Any] | None,
    failed: FailedStep | None,
    actions: list[ActionView],
    *,
    budget: int,
    now: float,
) -> dict[str, Any] | None:
    """judge_redrive's verdict on what was already read (`status`): `{"can_help": True,
    "plan"}` or `{"can_help": False, "reason"}`; None while there is nothing to rerun (no
    execution, or it did not stop)."""
    if description is None or description.get("status") not in STOPPED_STATUSES:
        return None
    action = None
    if failed is not None and failed.operation:
        action = next(
            ((a.action_key, a.record) for a in actions if a.step == failed.operation), None
        )
    try:
        plan = judge_redrive(case_id, record, description, failed, action, budget=budget, now=now)
    except RedriveRefused as refused:
        return {"can_help": False, "reason": str(refused)}
    return {"can_help": True, "plan": plan.to_json()}


def planned_action(
    step: str, key: str, summary: dict[str, Any] | None, budget: int
) -> dict[str, Any]:
    """The failed step's action as the plan shows it (its record None: never claimed)."""
    return {
        "step": step,
        "action_key": key,
        "status": summary["status"] if summary else None,
        "attempts": summary["attempts"] if summary else 0,
        "budget": budget,
        "remaining_budget": summary["remaining_budget"] if summary else budget,
        "error": summary["error"] if summary else None,
        "resolution": summary["resolution"] if summary else None,
    }


def refuse_spent_actions(plan: RedrivePlan) -> None:
    """RedriveRefused when the rerun's action cannot dispatch again: settled by a person,
    FAILED permanently, or its lifetime budget spent."""
    for action in plan.actions:
        resolution = action.get("resolution")
        if resolution:
            raise RedriveRefused(
                f"case {plan.case_id}: {action['action_key']} was settled by "
                f"{resolution.get('by')} at {resolution.get('at')}; a rerun would end in "
                "ActionSettled without dispatching"
            )
        if action["status"] == "FAILED":
            error = action.get("error") or {}
            raise RedriveRefused(
                f"case {plan.case_id}: {action['action_key']} FAILED permanently "
                f"({error.get('type')}: {error.get('message')}); a rerun would raise the "
                "recorded failure again"
            )
        if action["status"] != "COMPLETED" and action["remaining_budget"] <= 0:
            raise RedriveRefused(
                f"case {plan.case_id}: {action['action_key']} has used {action['attempts']} of "
                f"{action['budget']} lifetime attempts; a rerun would end in BudgetExhausted "
                "without dispatching. Reconcile it with the downstream by business reference "
                f"and decide by hand (`sagactl ledger {action['action_key']}`)"
            )


def client_token(plan: RedrivePlan) -> str:
    """RedriveExecution's idempotency token: one per execution and redrive number."""
    text = f"{plan.execution_arn}#{plan.redrive_count + 1}"
    return hashlib.sha256(text.encode()).hexdigest()[:64]
