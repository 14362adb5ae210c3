"""ReconcileActionFunction: reconcile one forward step by business reference."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.acceptance import accept_finishing
from saga.coldstart import resumed_collection
from saga.ledger import Attempt
from saga.models import ReconcilePayload, parse_model, verify_approval
from saga.observability import logger, metrics
from saga.settings import ReconcileActionEnvironment
from saga.tools.reconcile import reconcile_action
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ReconcilePayload, event, what="ReconcileStep payload")
    case = payload.case
    verify_approval(case)
    logger.append_keys(case_id=case.case_id, step=payload.step)
    runtime = Runtime.from_env(ReconcileActionEnvironment)
    accept_finishing(runtime.approvals, case.signed_approvals(), runtime.cases())
    lookup = runtime.reconciler(case, payload.step)
    result = reconcile_action(
        case,
        payload.step,
        Attempt.of_delivery(payload.attempt, context),
        execution_arn=payload.attempt.execution,
        ledger=runtime.ledger(),
        reconcile=lookup.find,
        reattempt_window_seconds=lookup.reattempt_window_seconds,
    )
    return result.model_dump(mode="json")
