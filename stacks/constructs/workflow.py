"""The saga's STANDARD state machine, loaded from statemachines/replacement_order.asl.json.

The ASL file holds the flow; this construct injects Retry and TimeoutSeconds into every Task
from the cdk context (stacks/workflow_policy.py) and passes the `${...}` names as
DefinitionSubstitutions. The role is derived from the definition: it may invoke exactly the
functions the ASL names and send to the escalation queue only if the ASL uses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import CfnResource
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import SagaConfig
from stacks.constructs.common import acknowledge, log_group, vended_log_group_name
from stacks.workflow_policy import DefinitionError, placeholders, render_definition

ASL_PATH = Path(__file__).resolve().parents[2] / "statemachines" / "replacement_order.asl.json"
QUEUE_PLACEHOLDER = "EscalationQueueUrl"


def function_placeholder(construct_id: str) -> str:
    """`ValidateCaseFunction` -> `ValidateCaseFunctionArn` (docs/architecture.md)."""
    return f"{construct_id}Arn"


class SagaWorkflow(Construct):
    """State machine with logging (ALL, no execution data), tracing and an execution timeout."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        functions: Mapping[str, lambda_.IFunction],
        escalation_queue: sqs.IQueue,
        asl_path: Path = ASL_PATH,
    ) -> None:
        super().__init__(scope, construct_id)
        definition = json.loads(asl_path.read_text(encoding="utf-8"))
        self.definition = render_definition(definition, config)

        by_placeholder: dict[str, lambda_.IFunction] = {
            function_placeholder(fid): fn for fid, fn in functions.items()
        }
        used = placeholders(self.definition)
        known = set(by_placeholder) | {QUEUE_PLACEHOLDER}
        unknown = used - known
        if unknown:
            raise DefinitionError(
                f"{asl_path.name} uses placeholders with no substitution: {sorted(unknown)}; "
                f"known: {sorted(known)}"
            )
        substitutions = {p: by_placeholder[p].function_arn for p in used if p in by_placeholder}
        if QUEUE_PLACEHOLDER in used:
            substitutions[QUEUE_PLACEHOLDER] = escalation_queue.queue_url

        self.log_group = log_group(
            self, "StateMachineLogGroup", config, name=vended_log_group_name(self, "states")
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(json.dumps(self.definition, indent=2)),
            definition_substitutions=dict(sorted(substitutions.items())),
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # Case data (addresses, payment references) stays out of the logs.
                include_execution_data=False,
            ),
            tracing_enabled=True,
            # The execution timeout is the definition's top-level TimeoutSeconds (rendered
            # above), so the local emulator enforces the same value.
        )
        cfn_state_machine = self.state_machine.node.default_child
        assert isinstance(cfn_state_machine, CfnResource)
        cfn_state_machine.add_metadata(
            "cfn-lint",
            {"config": {"ignore_checks": ["E1029"]}},  # ${...} are DefinitionSubstitutions
        )
        invoked = [by_placeholder[p].function_arn for p in sorted(used) if p in by_placeholder]
        if invoked:
            self.state_machine.add_to_role_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=invoked)
            )
        if QUEUE_PLACEHOLDER in used:
            self.state_machine.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[escalation_queue.queue_arn]
                )
            )
        acknowledge(
            self.state_machine,
            "AwsSolutions-IAM5[Resource::*]",
            "Resource '*' appears only in the statements Step Functions needs for "
            "logging (logs:CreateLogDelivery, GetLogDelivery, UpdateLogDelivery, "
            "DeleteLogDelivery, ListLogDeliveries, PutResourcePolicy, DescribeResourcePolicies, "
            "DescribeLogGroups) and X-Ray (PutTraceSegments, PutTelemetryRecords, "
            "GetSamplingRules, GetSamplingTargets); none of them supports resource-level "
            "permissions. Invocations name each function ARN exactly.",
        )
        acknowledge(
            self.state_machine,
            "CloudFormation-Validate::E1029",
            "The ${...} names in DefinitionString are resolved by the state machine's "
            "DefinitionSubstitutions property, not by Fn::Sub; CloudFormation substitutes them.",
        )
