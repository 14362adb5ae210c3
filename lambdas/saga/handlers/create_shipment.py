"""CreateShipmentFunction: the shipment through the Carrier port (no idempotency)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.acceptance import accept_forward
from saga.coldstart import resumed_collection
from saga.errors import CaseRecordRefused
from saga.ledger import Attempt
from saga.metric_names import CASE_RECORD_REFUSED
from saga.models import ToolPayload, parse_model, verify_approval
from saga.observability import logger, metrics
from saga.settings import CreateShipmentEnvironment
from saga.tools.ship import create_shipment, replay_shipment
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ToolPayload, event, what="CreateShipment payload")
    case = payload.case
    verify_approval(case)
    logger.append_keys(case_id=case.case_id)
    runtime = Runtime.from_env(CreateShipmentEnvironment)
    cases = runtime.cases()
    approvals = case.signed_approvals()
    accepted = accept_forward(runtime.approvals, approvals, cases, completes_case=True)
    if accepted.replay_only:
        # The case record says COMPLETED with this shipment already (docs/design.md §3.11).
        replayed = replay_shipment(
            case, execution_arn=payload.attempt.execution, ledger=runtime.ledger()
        )
        return replayed.model_dump(mode="json")
    try:
        result = create_shipment(
            case,
            Attempt.of_delivery(payload.attempt, context),
            execution_arn=payload.attempt.execution,
            ledger=runtime.ledger(),
            carrier=runtime.carrier(case),
            cases=cases,
        )
    except CaseRecordRefused:
        # The shipment is recorded in the ledger, not in the case record: counted and alarmed
        # on, since the delivery's task may no longer be there to fail (an aborted or timed-out
        # execution, docs/design.md §3.11).
        metrics.add_metric(name=CASE_RECORD_REFUSED, unit=MetricUnit.Count, value=1)
        raise
    # The case record says COMPLETED with the shipment: the saga's business outcome, counted
    # where it is written (RecordOutcome counts the cases it records).
    metrics.add_metric(name="CasesCompleted", unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
