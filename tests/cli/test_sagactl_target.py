"""How sagactl finds its AWS: stack outputs by DescribeStacks (moto), console URLs by region."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from sagactl.errors import NotFound
from sagactl.target import Target, aws_target

MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:ReplacementOrderSaga-dev-Sm"
TEMPLATE = {
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
    "Outputs": {
        "StateMachineArn": {"Value": MACHINE},
        "EscalationQueueUrl": {"Value": {"Ref": "Queue"}},
    },
}


@mock_aws
def test_aws_target_reads_the_stack_outputs_by_name() -> None:
    boto3.client("cloudformation", region_name="eu-west-1").create_stack(
        StackName="ReplacementOrderSaga-dev", TemplateBody=json.dumps(TEMPLATE)
    )

    target = aws_target("ReplacementOrderSaga-dev", region="eu-west-1")

    assert not target.local and target.region == "eu-west-1"
    arn = target.execution_arn("case-7")
    assert arn == (
        "arn:aws:states:eu-west-1:123456789012:execution:ReplacementOrderSaga-dev-Sm:case-7"
    )
    assert target.console_url(arn) == (
        "https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1"
        f"#/v2/executions/details/{arn}"
    )
    assert target.optional_output("EscalationQueueUrl")


@mock_aws
def test_aws_target_of_a_missing_stack_is_not_found() -> None:
    with pytest.raises(NotFound, match="stack ReplacementOrderSaga-qa does not exist in us-east-1"):
        aws_target("ReplacementOrderSaga-qa", region="us-east-1")


def test_local_targets_have_no_console_url() -> None:
    target = Target(
        session=boto3.Session(region_name="us-east-1"),
        outputs={"StateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:M"},
        local=True,
        stack_name="local",
        endpoint_url="http://127.0.0.1:1",
    )
    assert target.console_url(target.execution_arn("c")) is None
