"""The agent tools on AgentCore Gateway (docs/design.md §10), synthesized with the flag on:
one gateway with its JWT authorizer and one Lambda target per tenant, the tenant mapping in
the function's trusted environment, least privilege (no kms:Sign), cdk-nag clean. With the
flag off (cdk.json) there is no gateway at all, and the drafts table is deployed either way."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from offline_iam.evaluate import Decision, Grants, Principal, Request, evaluate
from offline_iam.stack_policies import offline_resolver, stack_policies
from saga.agent.gateway import TARGET_DELIMITER
from saga.agent.schemas import TOOL_NAMES
from stacks.config import ConfigError, SagaConfig
from stacks.constructs.agent_gateway import GATEWAY_NAME
from tests.infra.synth import Synthesized, synthesize

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
SHARED_ISSUER = "https://idp.example.com/.well-known/openid-configuration"
SERVICE = "bedrock-agentcore.amazonaws.com"
AGENT_GATEWAY = {
    "enabled": True,
    "tenants": {
        "acme": {
            "discovery_url": "https://idp.example.com/acme/.well-known/openid-configuration",
            "allowed_clients": ["acme-agent"],
        },
        "globex": {
            "discovery_url": "https://idp.example.com/globex/.well-known/openid-configuration",
            "allowed_audience": ["globex-agents"],
        },
    },
}


@pytest.fixture(scope="module")
def enabled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("agent"), {"agent_gateway": AGENT_GATEWAY})


def _policy_statements(synth: Synthesized, role_logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        found |= set(action if isinstance(action, list) else [action])
    return found


# The drafts table's logical id before drafts were keyed by tenant (up to commit ec32db1). A key
# change under the same logical id would make CloudFormation replace the table: create a new one
# and delete the deployed one with every draft in it (or orphan it, where data is retained).
LEGACY_DRAFTS_LOGICAL_ID = "TablesDraftsTableB824FC6C"


def test_off_by_default_and_the_drafts_tables_are_always_deployed(synthesized: Synthesized) -> None:
    assert synthesized.resources("AWS::BedrockAgentCore::Gateway") == {}
    assert synthesized.resources("AWS::BedrockAgentCore::GatewayTarget") == {}
    outputs = synthesized.template_json["Outputs"]
    drafts = synthesized.logical_id(synthesized.saga.stack.tables.drafts)
    assert outputs["DraftsTableName"]["Value"] == {"Ref": drafts}
    assert outputs["LegacyDraftsTableName"]["Value"] == {"Ref": LEGACY_DRAFTS_LOGICAL_ID}
    assert "AgentGatewayUrls" not in outputs


def test_drafts_are_keyed_tenant_first_and_the_deployed_drafts_table_stays_as_it_was(
    synthesized: Synthesized,
) -> None:
    stack = synthesized.saga.stack
    tables = synthesized.resources("AWS::DynamoDB::Table")
    drafts = synthesized.logical_id(stack.tables.drafts)
    assert drafts != LEGACY_DRAFTS_LOGICAL_ID  # a new table beside the old one, not a change
    assert tables[drafts]["Properties"]["KeySchema"] == [
        {"AttributeName": "tenant_id", "KeyType": "HASH"},
        {"AttributeName": "case_id", "KeyType": "RANGE"},
    ]
    # The old table, untouched: built as the cases table is (key `case_id`, same billing,
    # recovery, retention), which is exactly how it was built before.
    assert synthesized.logical_id(stack.tables.legacy_drafts) == LEGACY_DRAFTS_LOGICAL_ID
    cases = synthesized.logical_id(stack.tables.cases)
    assert tables[LEGACY_DRAFTS_LOGICAL_ID] == tables[cases]


def test_one_gateway_with_its_jwt_authorizer_and_one_target_per_tenant(
    enabled: Synthesized,
) -> None:
    stack = enabled.saga.stack
    assert stack.agent_gateway is not None
    function_id = enabled.logical_id(stack.agent_gateway.function)
    gateways = {
        props["Properties"]["Name"]: props["Properties"]
        for props in enabled.resources("AWS::BedrockAgentCore::Gateway").values()
    }
    assert set(gateways) == {"ReplacementOrderSaga-dev-acme", "ReplacementOrderSaga-dev-globex"}
    acme = gateways["ReplacementOrderSaga-dev-acme"]
    assert acme["AuthorizerType"] == "CUSTOM_JWT"
    assert acme["ProtocolType"] == "MCP"
    assert acme["AuthorizerConfiguration"]["CustomJWTAuthorizer"] == {
        "DiscoveryUrl": AGENT_GATEWAY["tenants"]["acme"]["discovery_url"],  # type: ignore[index]
        "AllowedClients": ["acme-agent"],
    }
    targets = list(enabled.resources("AWS::BedrockAgentCore::GatewayTarget").values())
    assert sorted(t["Properties"]["Name"] for t in targets) == [
        "acme-replacements",
        "globex-replacements",
    ]
    for target in targets:
        lambda_target = target["Properties"]["TargetConfiguration"]["Mcp"]["Lambda"]
        assert lambda_target["LambdaArn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        tools = lambda_target["ToolSchema"]["InlinePayload"]
        assert [tool["Name"] for tool in tools] == list(TOOL_NAMES)
        # The Gateway prefixes the target name with three underscores; ours never holds them.
        assert TARGET_DELIMITER not in target["Properties"]["Name"]
    function = enabled.template_json["Resources"][function_id]["Properties"]
    variables = function["Environment"]["Variables"]
    assert json.loads(variables["AGENT_TARGETS"]) == {
        "acme-replacements": "acme",
        "globex-replacements": "globex",
    }
    assert "AgentGatewayUrls" in enabled.template_json["Outputs"]


def test_the_agent_function_may_start_and_read_but_never_sign(enabled: Synthesized) -> None:
    stack = enabled.saga.stack
    assert stack.agent_gateway is not None
    role = stack.agent_gateway.function.role
    assert role is not None
    statements = _policy_statements(enabled, enabled.logical_id(role))
    actions = _actions(statements) - {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    actions = {a for a in actions if not a.startswith("logs:")}
    assert actions == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "kms:GetPublicKey",
        "states:StartExecution",
        "states:DescribeExecution",
        "states:GetExecutionHistory",
    }
    drafts = enabled.logical_id(stack.tables.drafts)
    legacy = enabled.logical_id(stack.tables.legacy_drafts)
    cases = enabled.logical_id(stack.tables.cases)
    for statement in statements:
        if "dynamodb:PutItem" in statement["Action"]:
            assert statement["Resource"] == {"Fn::GetAtt": [drafts, "Arn"]}
        if statement["Action"] == "dynamodb:GetItem" or "dynamodb:GetItem" in statement["Action"]:
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            assert {r["Fn::GetAtt"][0] for r in resources} <= {drafts, legacy, cases}
    gateway_role = enabled.logical_id(stack.agent_gateway.gateway_role)
    assert _actions(_policy_statements(enabled, gateway_role)) == {"lambda:InvokeFunction"}
    # Nobody in the saga signs: only the approvers' own roles have kms:Sign.
    approvers = {lid for lid in enabled.resources("AWS::IAM::Role") if "ApproverRole" in lid}
    everything = [
        s
        for p in enabled.resources("AWS::IAM::Policy").values()
        if not {r["Ref"] for r in p["Properties"]["Roles"]} & approvers
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert not {"kms:Sign", "kms:*", "*"} & _actions(everything)


def test_only_this_accounts_gateways_may_assume_the_gateway_role(enabled: Synthesized) -> None:
    stack = enabled.saga.stack
    assert stack.agent_gateway is not None
    role_id = enabled.logical_id(stack.agent_gateway.gateway_role)
    template = enabled.template_json
    (trust,) = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "bedrock-agentcore.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}
    # Evaluated as IAM would: the AgentCore service acting for a gateway of this account and
    # region may assume it; acting for another account's gateway (a confused deputy) may not.
    resolver = offline_resolver(template, stack.stack_name)
    role = stack_policies(template, resolver).roles[role_id]
    service = Principal(SERVICE, "123456789012", service=SERVICE)
    grants = Grants(service, [], {role.arn: role.trust}, frozenset({role.arn}))

    def assume(account: str, gateway_arn: str) -> Decision:
        context = {"aws:SourceAccount": account, "aws:SourceArn": gateway_arn}
        return evaluate(grants, Request("sts:AssumeRole", role.arn, context)).decision

    ours = "arn:aws:bedrock-agentcore:us-east-1:123456789012:gateway/gw-acme"
    theirs = "arn:aws:bedrock-agentcore:us-east-1:999999999999:gateway/gw-x"
    assert assume("123456789012", ours) is Decision.ALLOW
    assert assume("999999999999", theirs) is Decision.IMPLICIT_DENY
    assert assume("123456789012", theirs) is Decision.IMPLICIT_DENY
    other_region = ours.replace("us-east-1", "eu-west-1")
    assert assume("123456789012", other_region) is Decision.IMPLICIT_DENY


@pytest.mark.parametrize(
    ("stage", "tenant", "message"),
    [
        ("dev", "acme-and-sons-international-holdings", "is not a valid AgentCore gateway name"),
        # A tenant id may hold "--", a gateway name may not (a `_` is refused before, by the
        # tenant id's own pattern: tests/infra/test_tenant_ids.py).
        ("dev", "acme--corp", "is not a valid AgentCore gateway name"),
    ],
)
def test_a_gateway_name_agentcore_would_refuse_is_a_clear_synth_error(
    tmp_path: Path, stage: str, tenant: str, message: str
) -> None:
    auth = {"discovery_url": SHARED_ISSUER, "allowed_clients": ["c"]}
    context = {
        "stage": stage,
        "tenants": {tenant: ["boss@example.com"]},
        "approval_thresholds": {},
        "agent_gateway": {"enabled": True, "tenants": {tenant: auth}},
    }
    with pytest.raises(ValueError, match=re.escape(message) + ".*48 letters or digits"):
        synthesize(tmp_path, context)
    assert GATEWAY_NAME.match("ReplacementOrderSaga-dev-acme")
    assert not GATEWAY_NAME.match("a" * 49)
    assert GATEWAY_NAME.match("a" * 48)


def test_cdk_nag_is_clean_with_the_gateway(enabled: Synthesized) -> None:
    report = enabled.saga.nag.validate_scope(enabled.saga.stack)
    assert [v.rule_name for v in report.violations] == []
    assert report.success is True


def test_the_flag_refuses_a_gateway_without_its_authorizer(tmp_path: Path) -> None:
    from stacks.config import ConfigError

    with pytest.raises(ConfigError, match=r"agent_gateway\.enabled' needs"):
        synthesize(tmp_path, {"agent_gateway": {"enabled": True}})
    with pytest.raises(ConfigError, match=r"must restrict 'allowed_clients' or"):
        synthesize(
            tmp_path,
            {
                "agent_gateway": {
                    "enabled": True,
                    "tenants": {
                        "acme": {
                            "discovery_url": AGENT_GATEWAY["tenants"]["acme"][  # type: ignore[index]
                                "discovery_url"
                            ]
                        }
                    },
                }
            },
        )


@pytest.mark.parametrize(
    ("acme", "globex", "refused"),
    [
        ({"allowed_audience": ["agents"]}, {"allowed_audience": ["agents"]}, True),
        ({"allowed_clients": ["a"]}, {"allowed_audience": ["g"]}, True),  # a's client, g's aud
        ({"allowed_clients": ["a", "x"]}, {"allowed_clients": ["g", "x"]}, True),
        ({"allowed_clients": ["a"]}, {"allowed_clients": ["g"]}, False),
        ({"allowed_audience": ["a"]}, {"allowed_audience": ["g"]}, False),
    ],
)
def test_two_gateways_of_one_issuer_must_not_admit_a_common_token(
    acme: dict[str, Any], globex: dict[str, Any], refused: bool
) -> None:
    context = dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"])
    context["agent_gateway"] = {
        "enabled": True,
        "tenants": {
            "acme": {"discovery_url": SHARED_ISSUER, **acme},
            "globex": {"discovery_url": SHARED_ISSUER, **globex},
        },
    }
    if refused:
        with pytest.raises(ConfigError, match="could admit the same token"):
            SagaConfig.from_mapping(context)
    else:
        assert set(SagaConfig.from_mapping(context).agent_gateway.tenants) == {"acme", "globex"}
