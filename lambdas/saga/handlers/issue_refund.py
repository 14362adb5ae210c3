"""IssueRefundFunction: the refund through the PaymentProvider port."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.acceptance import accept_forward
from saga.coldstart import resumed_collection
from saga.ledger import Attempt
from saga.models import ToolPayload, parse_model, verify_approval
from saga.observability import logger, metrics
from saga.settings import IssueRefundEnvironment
from saga.tools.refund import issue_refund
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = parse_model(ToolPayload, event, what="IssueRefund payload")
    case = payload.case
    verify_approval(case)
    logger.append_keys(case_id=case.case_id)
    runtime = Runtime.from_env(IssueRefundEnvironment)
    accept_forward(runtime.approvals, case.signed_approvals(), runtime.cases())
    result = issue_refund(
        case,
        Attempt.of_delivery(payload.attempt, context),
        execution_arn=payload.attempt.execution,
        ledger=runtime.ledger(),
        provider=runtime.payment_provider(case),
        charge=runtime.refund_charge(case),
    )
    return result.model_dump(mode="json")
