"""The AgentCore Gateway Lambda target, invoked with the Gateway's documented shape: the event
is the tool's arguments, the tool name arrives in the client context as
`bedrockAgentCoreToolName` = `<target>___<tool>`, and the tenant is the target's in
AGENT_TARGETS, never an argument."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from moto import mock_aws

from local_aws.tables import StackTables
from saga.agent.gateway import gateway_schema
from saga.agent.schemas import input_schema
from saga.approval_keys import forget_public_keys
from saga.handlers.agent_tools import handler as agent_tools_handler
from saga.identity import agent_case_id
from tests.tools_harness import APPROVAL_KEYS_JSON, TABLE_NAMES, create_approval_keys, create_tables
from tests.unit.test_agent_tools import PROPOSAL

TARGETS = {"acme-replacements": "acme", "globex-replacements": "globex"}


@dataclass
class ClientContext:
    custom: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    client: Any = None


@dataclass
class GatewayContext:
    """The Lambda context object as the Python runtime gives it for a Gateway invoke."""

    client_context: ClientContext | None
    function_name: str = "AgentToolsFunction"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:AgentTools"
    aws_request_id: str = "b0b5c5d5-0000-4000-8000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def handler(arguments: dict[str, Any], context: GatewayContext) -> dict[str, Any]:
    """AgentToolsFunction's handler with this context (the runtime's object is duck-typed)."""
    return agent_tools_handler(arguments, cast("LambdaContext", context))


def gateway_context(target: str, tool: str) -> GatewayContext:
    return GatewayContext(
        ClientContext(
            {
                "bedrockAgentCoreGatewayId": "gw-acme-abc123",
                "bedrockAgentCoreTargetId": "TGT0000001",
                "bedrockAgentCoreMessageVersion": "1.0",
                "bedrockAgentCoreToolName": f"{target}___{tool}",
                "bedrockAgentCoreAwsRequestId": "8a8e0c2e-0000-4000-8000-000000000002",
                "bedrockAgentCoreMcpMessageId": "7",
            }
        )
    )


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, stack_tables: StackTables) -> Iterator[Any]:
    forget_public_keys()
    with mock_aws():
        client = boto3.client("dynamodb")  # the whole model: the test scans with it
        create_tables(stack_tables, client, TABLE_NAMES)
        create_approval_keys(boto3.client("kms"))
        machine = boto3.client("stepfunctions").create_state_machine(
            name="saga",
            definition=json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/sfn",
        )["stateMachineArn"]
        for name, value in {
            "POWERTOOLS_SERVICE_NAME": "agent-tools",
            "POWERTOOLS_METRICS_NAMESPACE": "test",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "CASES_TABLE": TABLE_NAMES["CASES_TABLE"],
            "DRAFTS_TABLE": TABLE_NAMES["DRAFTS_TABLE"],
            "LEGACY_DRAFTS_TABLE": TABLE_NAMES["LEGACY_DRAFTS_TABLE"],
            "APPROVAL_KEYS": APPROVAL_KEYS_JSON,
            "APPROVAL_THRESHOLDS": "{}",
            "STATE_MACHINE_ARN": machine,
            "AGENT_TARGETS": json.dumps(TARGETS),
        }.items():
            monkeypatch.setenv(name, value)
        yield client


def test_a_tool_call_through_a_target_acts_for_that_targets_tenant(gateway: Any) -> None:
    result = handler(dict(PROPOSAL), gateway_context("acme-replacements", "propose_replacement"))

    assert result["isError"] is False
    proposed = result["structuredContent"]
    assert proposed["case_id"] == agent_case_id("acme", PROPOSAL["request_id"])
    assert json.loads(result["content"][0]["text"]) == proposed
    key = {"tenant_id": {"S": "acme"}, "case_id": {"S": proposed["case_id"]}}
    draft = gateway.get_item(TableName=TABLE_NAMES["DRAFTS_TABLE"], Key=key)["Item"]
    assert draft["tenant_id"] == {"S": "acme"}

    # globex's target cannot see acme's case.
    seen = handler(
        {"case_id": proposed["case_id"]}, gateway_context("globex-replacements", "get_replacement")
    )
    assert seen["isError"] is True
    assert seen["structuredContent"]["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("context", "arguments", "code"),
    [
        (GatewayContext(None), PROPOSAL, "INVALID_REQUEST"),
        (GatewayContext(ClientContext({})), PROPOSAL, "INVALID_REQUEST"),
        (gateway_context("unmapped", "propose_replacement"), PROPOSAL, "INVALID_REQUEST"),
        (
            gateway_context("acme-replacements", "propose_replacement"),
            {**PROPOSAL, "tenant_id": "globex"},
            "INVALID_REQUEST",
        ),
        (
            gateway_context("acme-replacements", "start_replacement"),
            {"case_id": "agt-x"},
            "NOT_FOUND",
        ),
    ],
)
def test_refusals_are_tool_errors_with_a_code_and_change_nothing(
    gateway: Any, context: GatewayContext, arguments: dict[str, Any], code: str
) -> None:
    result = handler(dict(arguments), context)

    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == code
    assert result["content"][0]["text"].startswith(f"{code}: ")
    assert "Traceback" not in result["content"][0]["text"]
    assert gateway.scan(TableName=TABLE_NAMES["DRAFTS_TABLE"])["Count"] == 0


def test_the_gateway_schema_keeps_every_argument_and_what_is_required() -> None:
    full = input_schema("propose_replacement")
    inline = gateway_schema(full)
    assert set(inline["properties"]) == set(full["properties"])
    assert inline["required"] == full["required"]
    assert inline["properties"]["address"]["type"] == "object"
    assert set(inline["properties"]["address"]["required"]) == {
        "name",
        "line1",
        "city",
        "postal_code",
        "country",
    }
    assert inline["properties"]["amount_minor"] == {
        "type": "integer",
        "description": full["properties"]["amount_minor"]["description"],
    }
