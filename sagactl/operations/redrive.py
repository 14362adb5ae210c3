"""Redrive a failed execution, or refuse with the reason when redrive cannot help (docs/design.md
§6).

sagactl.views.redrive holds the rules; this reads what they judge (the execution, its history,
the failed step's ledger record) and sends RedriveExecution. The same call redrives on AWS and
in the local AWS (local_aws.redrive emulates RedriveExecution there).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from saga.identity import case_action_keys
from sagactl.operations.executions import execution_history, find_case_execution
from sagactl.operations.records import ledger_record
from sagactl.target import Target
from sagactl.views.case import case_tenant, record_summary
from sagactl.views.redrive import RedrivePlan, client_token, judge_redrive
from sagactl.views.timeline import find_failed_step


def plan_redrive(
    target: Target, case_id: str, *, budget: int, now: float | None = None
) -> RedrivePlan:
    """What a redrive would rerun; RedriveRefused when it cannot help (judge_redrive)."""
    found = find_case_execution(target, case_id)
    description = found.require()
    case_id = found.case_id  # CASE may have named an execution of the case
    failed = find_failed_step(execution_history(target, str(description["executionArn"])))
    tenant = case_tenant(found.record, description)
    action = None
    if failed is not None and failed.operation and tenant:
        key = case_action_keys(tenant, case_id)[failed.operation]
        record = ledger_record(target, key)
        action = (key, record_summary(record, budget) if record else None)
    return judge_redrive(
        case_id,
        found.record,
        description,
        failed,
        action,
        budget=budget,
        now=target.now() if now is None else now,
    )


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
