"""Small helpers shared by the constructs: log groups and explicit-action table grants."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, Aws, Fn, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import SagaConfig

_RETENTION = logs.RetentionDays
RETENTION_BY_DAYS: dict[int, logs.RetentionDays] = {
    1: _RETENTION.ONE_DAY,
    3: _RETENTION.THREE_DAYS,
    5: _RETENTION.FIVE_DAYS,
    7: _RETENTION.ONE_WEEK,
    14: _RETENTION.TWO_WEEKS,
    30: _RETENTION.ONE_MONTH,
    60: _RETENTION.TWO_MONTHS,
    90: _RETENTION.THREE_MONTHS,
    120: _RETENTION.FOUR_MONTHS,
    150: _RETENTION.FIVE_MONTHS,
    180: _RETENTION.SIX_MONTHS,
    365: _RETENTION.ONE_YEAR,
    400: _RETENTION.THIRTEEN_MONTHS,
    545: _RETENTION.EIGHTEEN_MONTHS,
    731: _RETENTION.TWO_YEARS,
    1096: _RETENTION.THREE_YEARS,
    1827: _RETENTION.FIVE_YEARS,
    2192: _RETENTION.SIX_YEARS,
    2557: _RETENTION.SEVEN_YEARS,
    2922: _RETENTION.EIGHT_YEARS,
    3288: _RETENTION.NINE_YEARS,
    3653: _RETENTION.TEN_YEARS,
}


def log_group(
    scope: Construct, construct_id: str, config: SagaConfig, *, name: str | None = None
) -> logs.LogGroup:
    """An explicit log group with the configured retention (no never-expiring default); its
    name is CloudFormation's unless `name` is given."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=RETENTION_BY_DAYS[config.functions.log_retention_days],
        removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
    )


VENDED_LOGS_PREFIX = "/aws/vendedlogs/"


def vended_log_group_name(scope: Construct, service: str) -> str:
    """`/aws/vendedlogs/<service>/<stack name>-<stack id's first 8 hex>` for a log group that an
    AWS service writes through CloudWatch Logs resource policies (Step Functions does).

    Those policies are capped at 5,120 characters per account and region, and each logging
    state machine adds its log group to them, so a few stacks fill them and the next deploy
    fails; under /aws/vendedlogs/ CloudWatch Logs grants the delivery without growing them
    (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html). The stack name carries
    the stage; the stack id's part makes the name new for each stack instance, so a log group
    retained from a deleted stack never blocks a redeploy of the same stage.
    """
    stack = Stack.of(scope)
    stack_uuid = Fn.select(2, Fn.split("/", stack.stack_id))
    return Fn.join(
        "",
        [
            f"{VENDED_LOGS_PREFIX}{service}/{stack.stack_name}-",
            Fn.select(0, Fn.split("-", stack_uuid)),
        ],
    )


def grant_table_actions(
    grantee: iam.IGrantable,
    table: dynamodb.ITable,
    actions: Sequence[str],
    *,
    index: str | None = None,
) -> None:
    """Allow exactly `actions` on the table (or on one named index), never a wildcard."""
    if not actions:
        raise ValueError("grant_table_actions needs at least one action")
    for action in actions:
        if not action.startswith("dynamodb:") or "*" in action:
            raise ValueError(f"not an explicit DynamoDB action: {action!r}")
    resources = [table.table_arn if index is None else f"{table.table_arn}/index/{index}"]
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=sorted(set(actions)), resources=resources)
    )


def acknowledge(scope: Construct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `scope` (and below) with a specific written reason."""
    if len(reason) < 40:
        raise ValueError(f"acknowledging {rule_id} needs a specific reason, got {reason!r}")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def execution_arns(state_machine: sfn.StateMachine, name_pattern: str) -> str:
    """The ARNs of the saga's executions whose names match `name_pattern` (`*`, `agt_acme_*`).

    Built from the partition, region and account pseudo parameters, never from the stack's
    environment: the CDK CLI gives the stack an account and region (CDK_DEFAULT_ACCOUNT /
    CDK_DEFAULT_REGION) where `python app.py` gives none, and `Stack.format_arn` would then
    write them literally, so cdk-nag's finding, which its acknowledgment must match exactly,
    would differ with the environment (`acknowledge_executions` writes the one finding id).
    """
    return (
        f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:"
        f"{state_machine.state_machine_name}:{name_pattern}"
    )


def acknowledge_executions(
    scope: Construct, state_machine: sfn.StateMachine, name_pattern: str, reason: str
) -> None:
    """Acknowledge cdk-nag's wildcard finding on `execution_arns(state_machine, name_pattern)`,
    for that pattern only (cdk-nag matches finding ids exactly: no other resource is covered)."""
    stack = Stack.of(scope)
    machine_id = stack.get_logical_id(state_machine.node.default_child)  # type: ignore[arg-type]
    acknowledge(
        scope,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
        f"<AWS::AccountId>:execution:<{machine_id}.Name>:{name_pattern}]",
        reason,
    )
