"""SweepStuckActionsFunction (scheduled): escalate ledger actions stuck IN_PROGRESS or UNKNOWN.

Emits the StuckActions metric on every sweep, zero included, so its alarm sees a steady series:
it counts every stuck action, also those whose message is not due this sweep (saga.tools.sweeper
backs the re-sends off).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.aws import dynamodb_client, sqs_client
from saga.coldstart import resumed_collection
from saga.observability import logger, metrics
from saga.settings import SweepStuckActionsEnvironment
from saga.tools.sweeper import StuckActionSweeper


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    env = SweepStuckActionsEnvironment.from_env()
    sweeper = StuckActionSweeper(
        dynamodb=dynamodb_client(),
        sqs=sqs_client(),
        ledger_table=env.ledger_table,
        escalation_queue_url=env.escalation_queue_url,
        grace_seconds=env.stuck_grace_seconds,
        sweep_every_seconds=env.sweep_every_seconds,
    )
    report = sweeper.sweep()
    metrics.add_metric(name="StuckActions", unit=MetricUnit.Count, value=len(report.stuck))
    summary = report.summary()
    if report.stuck:
        logger.warning("stuck ledger actions escalated", extra=summary)
    else:
        logger.info("no stuck ledger actions")
    return summary
