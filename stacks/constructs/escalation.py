"""The escalation queue: where a person picks up a case the automation could not finish.

Three producers: the state machine's Escalate state (RecordOutcomeFunction, once the case record
says ESCALATED: docs/design.md §3.10), the stuck-action sweeper, and an EventBridge rule for
executions that end FAILED, TIMED_OUT or ABORTED (but not for a refused rerun of a resolved case:
its message would wait for a decision already made).

Encryption is SQS-managed (SSE-SQS): EventBridge cannot deliver to a queue encrypted with the
AWS-managed `alias/aws/sqs` KMS key, and a customer-managed key would add a key policy, KMS
grants for every producer and a monthly key cost for no extra control over who reads the queue
(that is decided by IAM and the queue policy). Messages are still encrypted at rest.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.constructs.common import acknowledge

NOT_SUCCEEDED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
MAX_RECEIVES_BEFORE_DLQ = 5
# A rerun of a case a person resolved ends FAILED with this error and nothing done: nobody needs
# to hear of it (docs/design.md §3.10).
RESOLVED_CASE_ERROR = "ActionSettled"
# `detail.error` of an execution that needs a person: any other error, or none at all. The
# status-change event carries DescribeExecution's fields (`error` when the execution failed
# with one); `anything-but` matches only a present string, so a missing or null error is
# matched on its own (an ABORTED execution may have none).
NEEDS_A_PERSON = [
    {"error": events.Match.anything_but(RESOLVED_CASE_ERROR)},
    {"error": events.Match.null_value()},
    {"error": events.Match.does_not_exist()},
]


class Escalation(Construct):
    """Encrypted, TLS-only escalation queue with a dead-letter queue."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = _queue(self, "EscalationDeadLetterQueue")
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the escalation queue (and of the "
            "EventBridge delivery); a dead-letter queue of a dead-letter queue adds nothing.",
        )
        self.queue = _queue(
            self,
            "EscalationQueue",
            visibility_timeout=Duration.minutes(5),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES_BEFORE_DLQ
            ),
        )

    def route_unsuccessful_executions(self, state_machine: sfn.IStateMachine) -> events.Rule:
        """FAILED / TIMED_OUT / ABORTED executions of this state machine -> escalation queue,
        except a refused rerun of a resolved case (error ActionSettled)."""
        detail = events.EventField.from_path
        self.unsuccessful_execution_rule = events.Rule(
            self,
            "UnsuccessfulExecutionRule",
            description="Escalate saga executions that did not succeed",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": list(NOT_SUCCEEDED_STATUSES),
                    "stateMachineArn": [state_machine.state_machine_arn],
                    "$or": NEEDS_A_PERSON,
                },
            ),
            targets=[
                targets.SqsQueue(
                    self.queue,
                    message=events.RuleTargetInput.from_object(
                        {
                            "kind": "EXECUTION_NOT_SUCCEEDED",
                            "status": detail("$.detail.status"),
                            "case_id": detail("$.detail.name"),
                            "execution": detail("$.detail.executionArn"),
                            "error": detail("$.detail.error"),
                            "cause": detail("$.detail.cause"),
                            "time": detail("$.time"),
                        }
                    ),
                    dead_letter_queue=self.dead_letter_queue,
                    retry_attempts=10,
                )
            ],
        )
        return self.unsuccessful_execution_rule


def _queue(scope: Construct, construct_id: str, **options: Any) -> sqs.Queue:
    """An escalation queue: encrypted (SSE-SQS), TLS only, messages kept 14 days."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(14),
        **options,
    )
