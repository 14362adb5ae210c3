"""The agent tools on AgentCore Gateway (docs/design.md §10), synthesized with the flag on:
one gateway with its JWT authorizer and one Lambda target per tenant, the tenant mapping in
the function's trusted environment, least privilege (no kms:Sign), cdk-nag clean. With the
flag off (cdk.json) there is no gateway at all, and the drafts table is deployed either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from saga.agent.gateway import TARGET_DELIMITER
from saga.agent.schemas import TOOL_NAMES
from stacks.config import ConfigError, SagaConfig
from tests.infra.synth import Synthesized, synthesize

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
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
    # Nobody in the saga signs: no statement anywhere allows kms:Sign.
    everything = [
        s
        for p in enabled.resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert not {"kms:Sign", "kms:*", "*"} & _actions(everything)


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


SHARED_ISSUER = "https://idp.example.com/.well-known/openid-configuration"


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
