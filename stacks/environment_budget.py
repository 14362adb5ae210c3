"""Every function's environment fits Lambda's 4 KB, checked at synth (docs/design.md §9).

Lambda refuses a function whose variables (names and values together) exceed 4 KB ("Lambda
quotas": https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), and it does
so at deploy, after CloudFormation has started. Values that are deploy-time references (a
table's name, the queue's URL, the state machine's ARN) are counted at the longest they can
resolve to: CloudFormation names a resource `<stack>-<logical id>-<13 random characters>` when
the template gives none (truncated to the service's limit), in the longest region name, with a
12-digit account. A reference this module cannot bound counts as 256 characters.

The approval keys are the variable that grows with the configuration: APPROVAL_KEYS holds one
generation number per approver of a created key (saga.approval_keys), so 50 approvers take
about 1 KB, and TENANTS another; tests/infra/test_environment_budget.py synthesizes 50.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnResource, Stack

LAMBDA_ENVIRONMENT_LIMIT = 4096
LONGEST_REGION = len("ap-southeast-3")
LONGEST_PARTITION = len("aws-us-gov")
ACCOUNT_ID = 12
GENERATED_SUFFIX = 13  # CloudFormation's random part of a generated physical name
UNBOUNDED_REFERENCE = 256
# The longest physical name each service allows, and what Ref returns around it.
_NAME_LIMITS = {
    "AWS::DynamoDB::Table": 255,
    "AWS::SQS::Queue": 80,
    "AWS::StepFunctions::StateMachine": 80,
    "AWS::Lambda::Function": 64,
}


class EnvironmentTooLarge(ValueError):
    """A function's environment would exceed Lambda's 4 KB: the deploy would fail."""


def _generated_name(stack: Stack, logical_id: str, kind: str) -> int:
    return min(_NAME_LIMITS[kind], len(stack.stack_name) + len(logical_id) + 2 + GENERATED_SUFFIX)


def _reference_length(stack: Stack, resources: Mapping[str, Any], value: Mapping[str, Any]) -> int:
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return len(separator) * max(len(parts) - 1, 0) + sum(
            _length(stack, resources, part) for part in parts
        )
    if "Ref" in value:
        name = str(value["Ref"])
        pseudo = {
            "AWS::Region": LONGEST_REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": LONGEST_PARTITION,
            "AWS::URLSuffix": len("amazonaws.com.cn"),
            "AWS::StackName": len(stack.stack_name),
        }
        if name in pseudo:
            return pseudo[name]
        kind = str(resources.get(name, {}).get("Type", ""))
        if kind not in _NAME_LIMITS:
            return UNBOUNDED_REFERENCE
        generated = _generated_name(stack, name, kind)
        if kind == "AWS::SQS::Queue":  # the queue's URL
            return len("https://sqs..amazonaws.com.cn//") + LONGEST_REGION + ACCOUNT_ID + generated
        if kind == "AWS::StepFunctions::StateMachine":  # the state machine's ARN
            return (
                len("arn:::states:::stateMachine:")
                + LONGEST_PARTITION
                + LONGEST_REGION
                + (ACCOUNT_ID + generated)
            )
        return generated
    return UNBOUNDED_REFERENCE


def _length(stack: Stack, resources: Mapping[str, Any], value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, Mapping):
        return _reference_length(stack, resources, value)
    return len(json.dumps(value))


def _resources(stack: Stack) -> dict[str, Any]:
    """logical id -> {"Type": ...} of the stack's CloudFormation resources."""
    found: dict[str, Any] = {}
    for construct in stack.node.find_all():
        if isinstance(construct, CfnResource):
            found[stack.get_logical_id(construct)] = {"Type": construct.cfn_resource_type}
    return found


def environment_size(
    stack: Stack, resources: Mapping[str, Any], variables: Mapping[str, Any]
) -> int:
    """Bytes of the variables' names and values, references at their longest."""
    return sum(
        len(name.encode()) + _length(stack, resources, value) for name, value in variables.items()
    )


def check_environments(
    stack: Stack, environments: Mapping[str, Mapping[str, str]]
) -> dict[str, int]:
    """Each function's environment size (by construct path); EnvironmentTooLarge naming the
    function, its size and its largest variables when one exceeds 4 KB."""
    resources = _resources(stack)
    sizes: dict[str, int] = {}
    for path, given in environments.items():
        variables = {name: stack.resolve(value) for name, value in given.items()}
        size = sizes[path] = environment_size(stack, resources, variables)
        if size > LAMBDA_ENVIRONMENT_LIMIT:
            largest = sorted(
                variables, key=lambda n: _length(stack, resources, variables[n]), reverse=True
            )[:3]
            shares = ", ".join(f"{n} {_length(stack, resources, variables[n])} B" for n in largest)
            raise EnvironmentTooLarge(
                f"function {path}: its environment would take up to {size} bytes, Lambda "
                f"allows {LAMBDA_ENVIRONMENT_LIMIT} (largest: {shares}): fewer or shorter "
                "tenant and approver names, or fewer brought keys (each is a full ARN in "
                "APPROVAL_KEYS)"
            )
    return sizes


def check_agent_configs(stack: Stack, values: Mapping[str, str]) -> dict[str, int]:
    """Each tenant's agent configuration (stacks/constructs/agent_config.py) fits a standard SSM
    parameter (4 KB, "AWS Systems Manager endpoints and quotas"), references at their longest:
    EnvironmentTooLarge naming the tenant otherwise."""
    from saga.agent.config import PARAMETER_VALUE_LIMIT

    resources = _resources(stack)
    sizes: dict[str, int] = {}
    for tenant, value in values.items():
        size = sizes[tenant] = _length(stack, resources, stack.resolve(value))
        if size > PARAMETER_VALUE_LIMIT:
            raise EnvironmentTooLarge(
                f"the agent configuration of tenant {tenant} would take up to {size} bytes, an "
                f"SSM parameter holds {PARAMETER_VALUE_LIMIT}: fewer or shorter approver names, "
                "or fewer brought keys (each is a full ARN)"
            )
    return sizes
