"""The agent tools on Amazon Bedrock AgentCore Gateway (docs/design.md §10), behind the
`agent_gateway.enabled` flag (off by default: AgentCore is not in every region).

One Lambda function (saga.handlers.agent_tools) serves the three tools. Per tenant: one
gateway with its own inbound authorizer (CUSTOM_JWT: the tenant's identity provider, clients
and audience from the configuration) and one Lambda target named `<tenant>-replacements`. A
Lambda target receives the arguments and the gateway's client context, not the caller's
claims, so the tenant is taken from the target the call came through (AGENT_TARGETS, trusted
configuration); a gateway per tenant keeps one tenant's callers from reaching another
tenant's target, which every caller of a shared gateway could list and call.

Least privilege: the function may read and write drafts (only read the legacy drafts), read
cases, read the approval keys' public halves, start executions of the saga's state machine and
read them; never kms:Sign. The gateways' role may only invoke that function, and only this
account's gateways of this region may assume it (aws:SourceAccount, aws:SourceArn). Each
gateway's and target's name is checked at synth against AgentCore's pattern (48 letters or
digits for a gateway).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from saga.agent.gateway import gateway_schema
from saga.agent.schemas import DESCRIPTIONS, TOOL_NAMES, input_schema
from saga.settings import AgentToolsEnvironment
from stacks.config import SagaConfig
from stacks.constructs.common import acknowledge, acknowledge_executions, execution_arns
from stacks.constructs.tools import GET, PUT, TableAccess, ToolFunctions, ToolSpec

AGENT_TOOLS_SPEC = ToolSpec(
    "AgentToolsFunction",
    "saga.handlers.agent_tools.handler",
    "agent-tools",
    "Agent tools behind AgentCore Gateway: propose, get and start a replacement",
    (
        TableAccess("drafts", (GET, PUT)),
        # GetItem only: drafts proposed before ids carried the tenant are looked up first.
        TableAccess("legacy_drafts", (GET,)),
        TableAccess("cases", (GET,)),
    ),
    AgentToolsEnvironment,
)
# AgentCore's CreateGateway / CreateGatewayTarget name patterns (the service model of
# bedrock-agentcore-control): up to 48 (gateway) or 100 (target) letters and digits, each
# optionally followed by one hyphen.
GATEWAY_NAME = re.compile(r"^([0-9a-zA-Z]-?){1,48}$")
TARGET_NAME = re.compile(r"^([0-9a-zA-Z]-?){1,100}$")
START_ACTIONS = ("states:StartExecution",)
READ_EXECUTION_ACTIONS = ("states:DescribeExecution", "states:GetExecutionHistory")
GATEWAY_URLS_OUTPUT = "AgentGatewayUrls"


def target_name(tenant: str) -> str:
    return f"{tenant}-replacements"


def gateway_name(stack_name: str, tenant: str) -> str:
    return f"{stack_name}-{tenant}"


def check_names(stack_name: str, tenant: str) -> None:
    """The tenant's gateway and target names are what AgentCore accepts; a clear error at synth
    rather than a failed deploy."""
    gateway, target = gateway_name(stack_name, tenant), target_name(tenant)
    if not GATEWAY_NAME.match(gateway):
        raise ValueError(
            f"agent gateway of tenant {tenant!r}: the gateway name {gateway!r} is not a valid "
            "AgentCore gateway name (at most 48 letters or digits, each optionally followed by "
            "one hyphen): use a shorter stage or tenant name of letters, digits and single hyphens"
        )
    if not TARGET_NAME.match(target):
        raise ValueError(
            f"agent gateway of tenant {tenant!r}: the target name {target!r} is not a valid "
            "AgentCore target name (letters or digits, each optionally followed by one hyphen)"
        )


def tool_schema() -> list[dict[str, Any]]:
    """The Gateway's inline tool schema (its SchemaDefinition subset of each input schema)."""
    return [
        {
            "name": name,
            "description": DESCRIPTIONS[name],
            "inputSchema": gateway_schema(input_schema(name)),
        }
        for name in TOOL_NAMES
    ]


class AgentGateway(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        tools: ToolFunctions,
        tables: Mapping[str, dynamodb.ITable],
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        targets = {target_name(tenant): tenant for tenant in config.agent_gateway.tenants}
        self.function: lambda_.Function = tools.add_function(
            self,
            AGENT_TOOLS_SPEC,
            tables,
            values={"state_machine_arn": state_machine.state_machine_arn, "agent_targets": targets},
        )
        role = self.function.role
        assert isinstance(role, iam.Role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(START_ACTIONS), resources=[state_machine.state_machine_arn]
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(READ_EXECUTION_ACTIONS),
                resources=[execution_arns(state_machine, "*")],
            )
        )
        acknowledge_executions(
            role,
            state_machine,
            "*",
            "DescribeExecution and GetExecutionHistory are granted on the executions of the "
            "saga's own state machine only (execution:<machine name>:*): execution names are "
            "the case ids, unknown at deploy time. X-Ray's actions support no resource ARNs.",
        )

        # Confused-deputy protection: only this account's gateways in this region may assume it
        # (AgentCore's gateway service role trust policy, "Set up permissions for AgentCore
        # Gateway"). The gateways' own ARNs would make a cycle (each names this role).
        # From the pseudo parameters, as every ARN the stack writes (common.execution_arns).
        gateways = f"arn:{Aws.PARTITION}:bedrock-agentcore:{Aws.REGION}:{Aws.ACCOUNT_ID}:gateway/*"
        self.gateway_role = iam.Role(
            self,
            "GatewayRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": gateways},
                },
            ),
            description="AgentCore Gateway: may invoke the agent tools function, nothing else",
        )
        self.function.grant_invoke(self.gateway_role)
        function_id = stack.get_logical_id(self.function.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            self.gateway_role,
            f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
            "lambda:InvokeFunction is granted on the agent tools function and its versions "
            "(<function arn>:*), as CDK's grantInvoke writes it; no other function or action.",
        )
        self.gateways: dict[str, agentcore.CfnGateway] = {}
        for tenant in config.agent_gateway.tenants:
            check_names(config.stack_name, tenant)
        for tenant, auth in config.agent_gateway.tenants.items():
            jwt: dict[str, Any] = {"discoveryUrl": auth.discovery_url}
            if auth.allowed_clients:
                jwt["allowedClients"] = list(auth.allowed_clients)
            if auth.allowed_audience:
                jwt["allowedAudience"] = list(auth.allowed_audience)
            gateway = agentcore.CfnGateway(
                self,
                f"Gateway-{tenant}",
                name=gateway_name(config.stack_name, tenant),
                description=f"Replacement-order agent tools for tenant {tenant}",
                protocol_type="MCP",
                authorizer_type="CUSTOM_JWT",
                authorizer_configuration={"customJwtAuthorizer": jwt},
                role_arn=self.gateway_role.role_arn,
            )
            agentcore.CfnGatewayTarget(
                self,
                f"Target-{tenant}",
                gateway_identifier=gateway.attr_gateway_identifier,
                name=target_name(tenant),
                description=f"propose, get and start replacements as tenant {tenant}",
                target_configuration={
                    "mcp": {
                        "lambda": {
                            "lambdaArn": self.function.function_arn,
                            "toolSchema": {"inlinePayload": tool_schema()},
                        }
                    }
                },
                credential_provider_configurations=[{"credentialProviderType": "GATEWAY_IAM_ROLE"}],
            )
            self.gateways[tenant] = gateway

    def add_outputs(self, scope: Construct) -> None:
        urls = {tenant: gateway.attr_gateway_url for tenant, gateway in self.gateways.items()}
        CfnOutput(scope, GATEWAY_URLS_OUTPUT, value=Stack.of(self).to_json_string(urls))
