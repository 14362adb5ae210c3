"""The people's roles reach their own tenant's cases only (docs/design.md §10, §11), evaluated
offline with the repository's IAM evaluator on the synthesized template.

An agent role reads its tenant's agent cases (executions named `agt_<tenant>_...`, case records
under those ids) and the old ids that name no tenant, never another tenant's case by a computed
name. An approver role stores approvals on drafts and cannot change what anybody signs: its
UpdateItem is confined to the approval's attributes, in the old drafts' table too, whose key
names no tenant. Each request here is what the code sends (its condition keys computed by
offline_iam.requests), so an allowed flow and a refused rewrite are told apart by the policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from local_aws.aws_calls import AwsCall
from offline_iam.evaluate import Decision, Request, evaluate
from offline_iam.requests import Account, authorization_requests
from offline_iam.stack_policies import StackPolicies, offline_resolver, stack_policies
from saga.agent.config import agent_config_parameter
from saga.agent.drafts import DraftStore
from saga.identity import agent_case_id, execution_name, legacy_agent_case_id
from stacks.constructs.approvals import id_part
from tests.infra.synth import Synthesized

ACCOUNT = "123456789012"
REGION_ACCOUNT = f"us-east-1:{ACCOUNT}"
LONGEST_TENANT = "t" * 63  # saga.models.TENANT_ID_PATTERN's longest


def _policies(synth: Synthesized) -> StackPolicies:
    template = synth.template_json
    return stack_policies(template, offline_resolver(template, synth.saga.stack.stack_name))


def _one(synth: Synthesized, kind: str, fragment: str) -> str:
    [logical_id] = [lid for lid in synth.resources(kind) if fragment in lid]
    return logical_id


def _decide(policies: StackPolicies, role: str, request: Request, *, mfa: bool) -> Decision:
    context: dict[str, Any] = {**request.context, **policies.roles[role].session_context(mfa=mfa)}
    return evaluate(
        policies.grants(role), Request(request.action, request.resource, context)
    ).decision


def _dynamodb(operation: str, params: dict[str, Any], partition_keys: dict[str, str]) -> Request:
    """The one authorization request of a DynamoDB call, as the offline check computes it."""
    call = AwsCall("test", "role", "dynamodb", operation, params, "us-east-1")
    [request] = authorization_requests(call, Account(ACCOUNT, partition_keys))
    return request


class _Recording:
    """A DynamoDB client that records the UpdateItem the drafts' code sends."""

    def __init__(self) -> None:
        self.sent: dict[str, Any] = {}

    def update_item(self, **params: Any) -> dict[str, Any]:
        self.sent = params
        return {}


def _approval_update(table: str, case_id: str) -> dict[str, Any]:
    """The UpdateItem `sagactl case approve --case` sends to store an approval."""
    client = _Recording()
    store = DraftStore(client, table, legacy_table_name=table)  # type: ignore[arg-type]
    approval = {"revision": 1, "approved_by": "supervisor@acme", "signature": "c2ln"}
    store.approve(case_id, digest="sha256:" + "0" * 64, approval=approval)
    return client.sent


def test_an_agent_role_reads_its_own_cases_and_no_other_tenants(synthesized: Synthesized) -> None:
    policies = _policies(synthesized)
    agent = _one(synthesized, "AWS::IAM::Role", "AcmeAgentRole")
    machine = _one(synthesized, "AWS::StepFunctions::StateMachine", "WorkflowStateMachine")
    cases = _one(synthesized, "AWS::DynamoDB::Table", "TablesCasesTable")
    execution = f"arn:aws:states:{REGION_ACCOUNT}:execution:{machine}:{{}}"
    keys = {cases: "case_id"}

    def reads(case_id: str) -> dict[str, Decision]:
        requests = {
            "DescribeExecution": Request("states:DescribeExecution", execution.format(case_id)),
            "GetExecutionHistory": Request("states:GetExecutionHistory", execution.format(case_id)),
            "GetItem": _dynamodb(
                "GetItem", {"TableName": cases, "Key": {"case_id": {"S": case_id}}}, keys
            ),
        }
        return {name: _decide(policies, agent, r, mfa=False) for name, r in requests.items()}

    allowed = dict.fromkeys(("DescribeExecution", "GetExecutionHistory", "GetItem"), Decision.ALLOW)
    request_id = "TICKET-1001:replacement-1"
    assert reads(agent_case_id("acme", request_id)) == allowed
    assert reads(legacy_agent_case_id("acme", request_id)) == allowed  # named no tenant (§11)
    for theirs in (agent_case_id("globex", request_id), agent_case_id("acme-eu", request_id)):
        assert set(reads(theirs).values()) == {Decision.IMPLICIT_DENY}, theirs
    assert set(reads("case-0001").values()) == {Decision.IMPLICIT_DENY}  # nobody's agent case


def test_an_agent_role_reads_old_ids_of_their_exact_shape_only(synthesized: Synthesized) -> None:
    """The old ids name no tenant, so every agent may read them; the grant is their shape, `agt-`
    and 32 characters (IAM's `?` matches exactly one): another tenant's ordinary case whose id
    merely begins `agt-` stays out. The tools read a draft's execution by its case id (revision
    1), no later revision's (its digest is never the draft's)."""
    policies = _policies(synthesized)
    agent = _one(synthesized, "AWS::IAM::Role", "AcmeAgentRole")
    machine = _one(synthesized, "AWS::StepFunctions::StateMachine", "WorkflowStateMachine")
    cases = _one(synthesized, "AWS::DynamoDB::Table", "TablesCasesTable")
    execution = f"arn:aws:states:{REGION_ACCOUNT}:execution:{machine}:{{}}"

    def describe(name: str) -> Decision:
        request = Request("states:DescribeExecution", execution.format(name))
        return _decide(policies, agent, request, mfa=False)

    def record(case_id: str) -> Decision:
        params = {"TableName": cases, "Key": {"case_id": {"S": case_id}}}
        return _decide(policies, agent, _dynamodb("GetItem", params, {cases: "case_id"}), mfa=False)

    old = legacy_agent_case_id("globex", "TICKET-7")
    assert (describe(old), record(old)) == (Decision.ALLOW, Decision.ALLOW)
    for theirs in (
        "agt-2024-0042",  # another tenant's case id, begun so
        "agt-" + "0" * 31,  # one character short of the old shape
        old + "0",  # one too many
        old + "-x",
        "agt-" + "0" * 40,
        execution_name(old, 2),
    ):
        assert (describe(theirs), record(theirs)) == (Decision.IMPLICIT_DENY,) * 2, theirs


def test_a_drafts_execution_is_named_inside_its_tenants_agent_names() -> None:
    """A draft runs as revision 1 (saga.agent.drafts.DRAFT_REVISION), whose execution name is
    its case id, whatever the tenant's length; the IAM pattern relies on it."""
    from saga.agent.drafts import DRAFT_REVISION

    for tenant in ("acme", LONGEST_TENANT):
        case_id = agent_case_id(tenant, "TICKET-1:replacement")
        assert execution_name(case_id, DRAFT_REVISION) == case_id
        assert case_id.startswith(f"agt_{tenant}_")


@pytest.mark.parametrize("legacy", [False, True], ids=["drafts", "old drafts"])
def test_an_approver_role_stores_an_approval_and_cannot_rewrite_a_draft(
    synthesized: Synthesized, legacy: bool
) -> None:
    policies = _policies(synthesized)
    approver = _one(synthesized, "AWS::IAM::Role", "AcmeSupervisorAtAcmeApproverRole")
    if legacy:
        table = _one(synthesized, "AWS::DynamoDB::Table", "TablesDraftsTable")
        keys, theirs = {table: "case_id"}, legacy_agent_case_id("globex", "T-1")
        own = legacy_agent_case_id("acme", "T-1")
    else:
        table = _one(synthesized, "AWS::DynamoDB::Table", "TenantDraftsTable")
        keys, theirs = {table: "tenant_id"}, agent_case_id("globex", "T-1")
        own = agent_case_id("acme", "T-1")

    def decide(params: dict[str, Any]) -> Decision:
        return _decide(policies, approver, _dynamodb("UpdateItem", params, keys), mfa=True)

    store_approval = _approval_update(table, own)
    assert decide(store_approval) is Decision.ALLOW
    rewrites = {
        "parameters and digest": "SET parameters = :p, digest = :d",
        "request id": "SET request_id = :p",
    }
    if legacy:  # the tenant is the key of the drafts table, which no UpdateItem can change
        rewrites["tenant"] = "SET tenant_id = :p, digest = :d"
    for what, expression in rewrites.items():
        rewrite = {
            "TableName": table,
            "Key": store_approval["Key"],
            "UpdateExpression": expression,
            "ExpressionAttributeValues": {":p": {"S": "x"}, ":d": {"S": "y"}},
        }
        if "digest" not in expression:
            rewrite["ExpressionAttributeValues"] = {":p": {"S": "x"}}
        assert decide(rewrite) is not Decision.ALLOW, what
    # Reading the whole item back through the UpdateItem is reading, not storing an approval.
    assert decide({**store_approval, "ReturnValues": "ALL_OLD"}) is not Decision.ALLOW
    # So is asking for it when the condition fails, which no condition key governs: the
    # store never asks (offline_iam/dynamodb_context.py counts it as reading every attribute).
    assert "ReturnValuesOnConditionCheckFailure" not in store_approval
    on_failure = {**store_approval, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    assert decide(on_failure) is not Decision.ALLOW
    if not legacy:  # another tenant's draft is out of reach altogether
        other = _approval_update(table, theirs)
        assert decide(other) is not Decision.ALLOW


def test_an_agent_role_reads_its_tenants_configuration_and_no_other_tenants(
    synthesized: Synthesized,
) -> None:
    """`sagactl mcp --tenant T` reads T's agent configuration parameter and nothing that names
    another tenant's approvers: not another tenant's parameter, not the stack's outputs
    (DescribeStacks), not ValidateCase's environment (GetFunctionConfiguration)."""
    policies = _policies(synthesized)
    stack = synthesized.saga.stack
    validate = _one(synthesized, "AWS::Lambda::Function", "ValidateCaseFunction")
    resolver = offline_resolver(synthesized.template_json, stack.stack_name)
    stack_id = str(resolver.pseudo("AWS::StackId"))

    def parameter(tenant: str) -> Request:
        name = agent_config_parameter(stack.stack_name, tenant)
        call = AwsCall("test", "role", "ssm", "GetParameter", {"Name": name}, "us-east-1")
        [request] = authorization_requests(call, Account(ACCOUNT, {}))
        return request

    tenants = ("acme", "globex", "hooli")
    for tenant in tenants:
        agent = _one(synthesized, "AWS::IAM::Role", f"{id_part(tenant)}AgentRole")
        decide = {
            "own": _decide(policies, agent, parameter(tenant), mfa=False),
            "outputs": _decide(
                policies, agent, Request("cloudformation:DescribeStacks", stack_id), mfa=False
            ),
            "ValidateCase": _decide(
                policies,
                agent,
                Request(
                    "lambda:GetFunctionConfiguration",
                    f"arn:aws:lambda:{REGION_ACCOUNT}:function:{validate}",
                ),
                mfa=False,
            ),
            **{
                other: _decide(policies, agent, parameter(other), mfa=False)
                for other in tenants
                if other != tenant
            },
        }
        assert decide.pop("own") is Decision.ALLOW, tenant
        assert set(decide.values()) == {Decision.IMPLICIT_DENY}, (tenant, decide)
