"""ValidateCaseFunction: validate, authorize, verify the approval, record the case."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.cases import OwningExecution
from saga.coldstart import resumed_collection
from saga.models import ValidatePayload, parse_model
from saga.observability import logger, metrics
from saga.settings import ValidateCaseEnvironment
from saga.tools.validate import validate_case
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ValidatePayload, event, what="ValidateCase payload")
    runtime = Runtime.from_env(ValidateCaseEnvironment)
    result = validate_case(
        payload.case,
        tenants=runtime.tenants,
        cases=runtime.cases(),
        execution=OwningExecution(payload.attempt.execution, payload.attempt.started),
        approvals=runtime.approvals,
    )
    # A duplicate is not a failure (nobody is paged): it is counted on its own.
    metric = "CasesDuplicate" if result.duplicate else "CasesAccepted"
    metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
