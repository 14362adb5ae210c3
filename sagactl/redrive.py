"""Redrive a failed execution, or refuse with the reason when redrive cannot help (design.md §6).

Redrive reruns the failed state with its input and fresh Retry counters; the states that
succeeded are not rerun. Every rerun reuses the execution's action keys, so the ledger's
lifetime attempt budget (the one counter a redrive cannot reset) decides whether a rerun can
still dispatch: with no budget left it would only end in BudgetExhausted, so it is refused here.

Local mode: moto 5.2.5 has no RedriveExecution. `emulate_redrive` reruns the failed Task state:
its Lambda function with the payload the state last sent (same case, same action keys), as redrive
attempt n+1, with fresh Retry counters under the state's own Retry policy (the waits are skipped).
It emulates the failed step only: the states after it are not run and the emulated execution
stays FAILED.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sagactl.errors import RedriveRefused
from sagactl.target import Target
from sagactl.timeline import (
    FailedStep,
    case_action_keys,
    describe_execution,
    execution_history,
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
    description = describe_execution(target, case_id)
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
    stop = description.get("stopDate")
    stopped_epoch = stop.timestamp() if isinstance(stop, datetime) else None
    current = target.now() if now is None else now
    if stopped_epoch is not None and current - stopped_epoch > REDRIVE_WINDOW_SECONDS:
        days = (current - stopped_epoch) / 86400
        raise RedriveRefused(
            f"case {case_id}: the execution closed {days:.0f} days ago; Step Functions redrives "
            "only within 14 days of the close. Reconcile the open actions and start a new case"
        )
    if description.get("redriveStatus") == "NOT_REDRIVABLE":
        raise RedriveRefused(
            f"case {case_id}: Step Functions says NOT_REDRIVABLE: "
            f"{description.get('redriveStatusReason', 'no reason given')}"
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
        "emulated": False,
        "execution_arn": plan.execution_arn,
        "redrive": plan.redrive_count + 1,
        "redrive_date": redrive_date.isoformat()
        if isinstance(redrive_date, datetime)
        else redrive_date,
        "console_url": target.console_url(plan.execution_arn),
    }


def state_retriers(target: Target, state: str) -> list[dict[str, Any]]:
    """The failed state's Retry policy, from the deployed definition."""
    definition = target.client("stepfunctions").describe_state_machine(
        stateMachineArn=target.state_machine_arn
    )["definition"]
    states = json.loads(definition).get("States", {})
    retriers = states.get(state, {}).get("Retry", [])
    return [retrier for retrier in retriers if isinstance(retrier, dict)]


def _matching_retrier(retriers: list[dict[str, Any]], error: str) -> int | None:
    for index, retrier in enumerate(retriers):
        names = retrier.get("ErrorEquals", [])
        if error in names or "States.ALL" in names:
            return index
        if "States.TaskFailed" in names and error != "States.Timeout":
            return index
    return None


def _invoke(target: Target, function: str, payload: dict[str, Any]) -> tuple[bool, Any]:
    response = target.client("lambda").invoke(
        FunctionName=function, Payload=json.dumps(payload).encode()
    )
    body = response["Payload"].read()
    try:
        answer: Any = json.loads(body) if body else None
    except ValueError:
        answer = body.decode(errors="replace")
    if response.get("FunctionError"):
        error = answer if isinstance(answer, dict) else {}
        return False, {
            "type": str(error.get("errorType", response["FunctionError"])),
            "message": str(error.get("errorMessage", answer))[:300],
        }
    return True, answer


def emulate_redrive(target: Target, plan: RedrivePlan) -> dict[str, Any]:
    """Rerun the failed Task state locally: its Lambda with its last payload, as redrive n+1,
    with fresh Retry counters under the state's own Retry policy (waits are skipped)."""
    step = plan.failed_step
    if step is None or step.function_name is None or step.payload is None:
        state = step.state if step else "unknown"
        raise RedriveRefused(
            f"case {plan.case_id}: the failed state {state} is not a Lambda task, so there is "
            "no step to re-invoke; emulation covers only Lambda task states"
        )
    retriers = state_retriers(target, step.state)
    counters = [0] * len(retriers)
    redrive_number = plan.redrive_count + 1
    invocations: list[dict[str, Any]] = []
    while True:
        payload = copy.deepcopy(step.payload)
        if isinstance(payload.get("attempt"), dict):
            payload["attempt"]["retry"] = len(invocations)  # redrive resets Retry counters
            payload["attempt"]["redrive"] = redrive_number
        ok, answer = _invoke(target, step.function_name, payload)
        invocations.append({"retry": len(invocations), "ok": ok, "error": None if ok else answer})
        if ok:
            break
        index = _matching_retrier(retriers, answer["type"])
        if index is None or counters[index] >= int(retriers[index].get("MaxAttempts", 3)):
            break
        counters[index] += 1
    last = invocations[-1]
    result: dict[str, Any] = {
        "emulated": True,
        "execution_arn": plan.execution_arn,
        "state": step.state,
        "function": step.function_name,
        "redrive": redrive_number,
        "invocations": invocations,
        "succeeded": last["ok"],
        "error": last["error"],
        "result": answer if last["ok"] else None,
        "not_run": (
            f"only {step.state} was rerun (with its Retry policy, waits skipped); the states "
            "after it were not run and the execution stays FAILED in the emulator"
        ),
        "actions": [],
    }
    ledger = ledger_for(target)
    for action in plan.actions:
        record = ledger.get(action["action_key"])
        result["actions"].append(
            {
                "step": action["step"],
                "action_key": action["action_key"],
                "before": {key: action[key] for key in ("status", "attempts")},
                "after": record_summary(record, action["budget"]) if record else None,
            }
        )
    return result
