"""Everything known about one case, read from a target (sagactl.views.case builds the view).

Sources: DescribeExecution + GetExecutionHistory (the states the execution went through, with
retries and caught errors), the action ledger (each action's record), the sandbox tables (effects
counted by `case_id`), the reservations table, the cases table (the terminal outcome) and the
escalation queue's depth. The queue is never received from: a peek counts as a receive and would
push the operators' messages towards the dead-letter queue.
"""

from __future__ import annotations

from saga.identity import case_action_keys
from sagactl.config import resolve_budget
from sagactl.operations.executions import execution_history, execution_of, find_case_execution
from sagactl.operations.queue import escalation_queue_depth
from sagactl.operations.records import case_actions, read_effects
from sagactl.target import Target
from sagactl.views.case import CaseView, case_tenant, case_view
from sagactl.views.redrive import redrive_verdict
from sagactl.views.timeline import find_failed_step


def gather(
    target: Target, case: str, *, budget: int | None = None, execution_arn: str | None = None
) -> CaseView:
    """Everything known about a case (find_case_execution; NotFound when there is neither an
    execution nor a case record), or about one of its executions (`execution_arn`)."""
    budget = resolve_budget(target, budget)
    if execution_arn is None:
        found = find_case_execution(target, case)
    else:
        found = execution_of(target, case, execution_arn)
    case_id, record, description = found.case_id, found.record, found.description
    history = execution_history(target, description["executionArn"]) if description else []
    tenant = case_tenant(record, description)
    actions = case_actions(target, tenant, case_id, budget) if tenant else []
    now = target.now()
    redrive = redrive_verdict(
        case_id,
        record,
        description,
        find_failed_step(history),
        actions,
        budget=budget,
        now=now,
    )
    return case_view(
        case_id,
        record,
        description,
        history,
        actions=actions,
        effects=read_effects(
            target, case_id, case_action_keys(tenant, case_id) if tenant else None
        ),
        queue_depth=escalation_queue_depth(target),
        budget=budget,
        now=now,
        redrive=redrive,
        console_url=(target.console_url(str(description["executionArn"])) if description else None),
    )
