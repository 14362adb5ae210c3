"""RecordOutcomeFunction: the terminal case record and the execution output; at the Escalate
state, the CASE_ESCALATED message after the record (docs/design.md §3.10, §5)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.acceptance import accept_finishing
from saga.aws import sqs_client
from saga.coldstart import resumed_collection
from saga.models import OutcomePayload, parse_model, verify_approval
from saga.observability import logger, metrics
from saga.settings import EscalationQueueVariables, RecordOutcomeEnvironment
from saga.tools.outcome import EscalationQueue, record_outcome
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(OutcomePayload, event, what="RecordOutcome payload")
    verify_approval(payload.case)
    logger.append_keys(case_id=payload.case.case_id, outcome=payload.outcome)
    runtime = Runtime.from_env(RecordOutcomeEnvironment)
    cases = runtime.cases()
    accept_finishing(runtime.approvals, payload.case.signed_approvals(), cases)
    result = record_outcome(
        payload,
        cases=cases,
        execution_arn=payload.attempt.execution,
        escalations=EscalationQueue(
            sqs_client(), runtime.variables(EscalationQueueVariables).escalation_queue_url
        ),
    )
    # CasesCompleted / CasesEscalated: the saga's business outcome, one per terminal case.
    metrics.add_metric(name=f"Cases{payload.outcome.title()}", unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
