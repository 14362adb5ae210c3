"""ReleaseReservationFunction: the compensation of the reservation."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.acceptance import accept_finishing
from saga.coldstart import resumed_collection
from saga.identity import Operation
from saga.ledger import Attempt
from saga.models import ToolPayload, parse_model, verify_approval
from saga.observability import logger, metrics
from saga.settings import ReleaseReservationEnvironment
from saga.tools.release import release_reservation
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ToolPayload, event, what="ReleaseReservation payload")
    case = payload.case
    verify_approval(case)
    logger.append_keys(case_id=case.case_id)
    runtime = Runtime.from_env(ReleaseReservationEnvironment)
    accept_finishing(runtime.approvals, case.signed_approvals(), runtime.cases())
    result = release_reservation(
        case,
        Attempt.of_delivery(payload.attempt, context),
        execution_arn=payload.attempt.execution,
        ledger=runtime.ledger(),
        inventory=runtime.inventory(case, Operation.RELEASE),
        cases=runtime.cases(),
    )
    return result.model_dump(mode="json")
