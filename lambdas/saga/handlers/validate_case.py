"""ValidateCaseFunction: validate, authorize, verify the approval, record the case."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.cases import OwningExecution
from saga.coldstart import resumed_collection
from saga.errors import DuplicateExecution
from saga.metric_names import CASES_DUPLICATE
from saga.models import ValidatePayload, parse_model
from saga.observability import logger, metrics
from saga.settings import RefundCeilingsVariables, ValidateCaseEnvironment
from saga.tools.validate import validate_case
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ValidatePayload, event, what="ValidateCase payload")
    runtime = Runtime.from_env(ValidateCaseEnvironment)
    try:
        result = validate_case(
            payload.case,
            tenants=runtime.tenants,
            cases=runtime.cases(),
            execution=OwningExecution(payload.attempt.execution, payload.attempt.started),
            approvals=runtime.approvals,
            drafts=runtime.drafts(),
            ceilings=runtime.variables(RefundCeilingsVariables).refund_ceilings,
            case_rules=runtime.case_rules(),
        )
    except DuplicateExecution as duplicate:
        # Not a failure: the workflow catches it and ends SUCCEEDED (docs/design.md §4.1). A
        # function error still counts in Lambda's Errors metric: this count is what the
        # dashboard takes out of it, and this line says so in the log next to the runtime's
        # error record.
        metrics.add_metric(name=CASES_DUPLICATE, unit=MetricUnit.Count, value=1)
        logger.info("duplicate execution: nothing done", extra={"duplicate": duplicate.message})
        raise
    metrics.add_metric(name="CasesAccepted", unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
