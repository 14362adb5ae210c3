"""Redrive a failed execution, or refuse with the reason when redrive cannot help (design.md §6).

Redrive (Step Functions RedriveExecution) reruns the failed state with the input and variables
it had, with fresh Retry counters; the states that succeeded are not rerun. Every rerun reuses
the execution's action keys, so the ledger's lifetime attempt budget (the one counter a redrive
cannot reset) decides whether a rerun can still dispatch: with no budget left it would only end
in BudgetExhausted, so it is refused here. The same call redrives on AWS and in the local AWS
(sagactl.local.redrive emulates RedriveExecution there).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from saga.identity import case_action_keys
from sagactl.errors import RedriveRefused
from sagactl.target import Target
from sagactl.timeline import (
    FailedStep,
    execution_history,
    find_case_execution,
    find_failed_step,
    ledger_for,
    record_summary,
)

REDRIVE_WINDOW_SECONDS = 14 * 86400
REDRIVABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})


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


def plan_redrive(
    target: Target, case_id: str, *, budget: int, now: float | None = None
) -> RedrivePlan:
    """What a redrive would rerun; RedriveRefused when it cannot help."""
    found = find_case_execution(target, case_id)
    description = found.require()
    case_id = found.case_id  # CASE may have named an execution of the case
    status = str(description["status"])
    arn = str(description["executionArn"])
    if status not in REDRIVABLE_STATUSES:
        hint = {
            "RUNNING": "it is still RUNNING; wait for it (`sagactl watch`)",
            "SUCCEEDED": "it SUCCEEDED; there is nothing to rerun",
            "PENDING_REDRIVE": "a redrive is already pending",
        }.get(status, f"it is {status}")
        raise RedriveRefused(
            f"case {case_id}: redrive reruns only FAILED, TIMED_OUT or ABORTED executions; {hint}"
        )
    # Step Functions judges on its own clock; the check below covers a service that says nothing.
    if description.get("redriveStatus") == "NOT_REDRIVABLE":
        raise RedriveRefused(
            f"case {case_id}: Step Functions says NOT_REDRIVABLE: "
            f"{description.get('redriveStatusReason', 'no reason given')}"
        )
    stop = description.get("stopDate")
    stopped_epoch = stop.timestamp() if isinstance(stop, datetime) else None
    current = target.now() if now is None else now
    if stopped_epoch is not None and current - stopped_epoch > REDRIVE_WINDOW_SECONDS:
        days = (current - stopped_epoch) / 86400
        raise RedriveRefused(
            f"case {case_id}: the execution closed {days:.0f} days ago; Step Functions redrives "
            "only within 14 days of the close. Reconcile the open actions and start a new case"
        )
    failed = find_failed_step(execution_history(target, arn))
    plan = RedrivePlan(
        case_id=case_id,
        execution_arn=arn,
        status=status,
        stopped_at=stop.isoformat() if isinstance(stop, datetime) else None,
        redrive_count=int(description.get("redriveCount", 0) or 0),
        failed_step=failed,
    )
    if failed is not None and failed.operation:
        tenant = _tenant(description)
        if tenant:
            key = case_action_keys(tenant, case_id)[failed.operation]
            record = ledger_for(target).get(key)
            summary = record_summary(record, budget) if record else None
            plan.actions.append(
                {
                    "step": failed.operation,
                    "action_key": key,
                    "status": summary["status"] if summary else None,
                    "attempts": summary["attempts"] if summary else 0,
                    "budget": budget,
                    "remaining_budget": summary["remaining_budget"] if summary else budget,
                    "error": summary["error"] if summary else None,
                    "resolution": summary["resolution"] if summary else None,
                }
            )
    _refuse_spent_actions(plan)
    return plan


def _tenant(description: dict[str, Any]) -> str | None:
    try:
        case = json.loads(description.get("input") or "{}")
    except ValueError:
        return None
    tenant = case.get("tenant_id") if isinstance(case, dict) else None
    return tenant if isinstance(tenant, str) and tenant else None


def _refuse_spent_actions(plan: RedrivePlan) -> None:
    for action in plan.actions:
        resolution = action.get("resolution")
        if resolution:
            raise RedriveRefused(
                f"case {plan.case_id}: {action['action_key']} was settled by "
                f"{resolution.get('by')} at {resolution.get('at')} "
                f"({resolution.get('decision')!r}); a rerun would end in ActionSettled "
                "without dispatching"
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


def redrive(target: Target, plan: RedrivePlan) -> dict[str, Any]:
    response = target.client("stepfunctions").redrive_execution(
        executionArn=plan.execution_arn, clientToken=client_token(plan)
    )
    redrive_date = response.get("redriveDate")
    return {
        "execution_arn": plan.execution_arn,
        "redrive": plan.redrive_count + 1,
        "redrive_date": redrive_date.isoformat()
        if isinstance(redrive_date, datetime)
        else redrive_date,
        "console_url": target.console_url(plan.execution_arn),
    }
