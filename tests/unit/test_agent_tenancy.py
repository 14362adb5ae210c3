"""An agent sees and touches only its own tenant's cases (docs/design.md §10), on moto: agent
case ids carry their tenant, the case model refuses another tenant's, every status comes from
the draft's own records, and drafts proposed before ids carried the tenant keep working.
Through real MCP clients and the running saga: tests/e2e/test_agent_tenants.py."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from local_aws.approval_keys import sign_locally
from saga.agent.drafts import DraftStore, draft_case
from saga.agent.tools import AgentTools, ErrorCode
from saga.dynamodb import to_item
from saga.errors import InvalidRequest
from saga.identity import (
    agent_case_id,
    agent_namespace,
    is_legacy_agent_case_id,
    legacy_agent_case_id,
)
from saga.models import CASE_ID_PATTERN, TENANT_ID_PATTERN, parse_case
from tests import legacy_drafts
from tests.tools_harness import TABLE_NAMES, agent_proposal, raw_case
from tests.unit.test_agent_tools import PROPOSAL, approve, executions, refused

TENANTS = st.from_regex(TENANT_ID_PATTERN, fullmatch=True)
REQUESTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", fullmatch=True)


# --- the id ------------------------------------------------------------------------------------
@given(tenant=TENANTS, request_id=REQUESTS)
def test_an_agent_case_id_is_a_case_id_that_names_its_tenant(tenant: str, request_id: str) -> None:
    case_id = agent_case_id(tenant, request_id)
    assert re.fullmatch(CASE_ID_PATTERN, case_id) and len(case_id) <= 80
    assert agent_namespace(case_id) == tenant
    assert not is_legacy_agent_case_id(case_id)
    assert is_legacy_agent_case_id(legacy_agent_case_id(tenant, request_id))


@given(first=TENANTS, second=TENANTS, request_id=REQUESTS)
def test_two_tenants_never_share_an_agent_case_id(first: str, second: str, request_id: str) -> None:
    if first != second:
        assert agent_case_id(first, request_id) != agent_case_id(second, request_id)


def test_the_delimiter_keeps_a_tenant_whose_id_extends_another_apart() -> None:
    acme, acme_eu = agent_case_id("acme", "t-1"), agent_case_id("acme-eu", "t-1")
    assert acme.startswith("agt_acme_") and acme_eu.startswith("agt_acme-eu_")
    assert (agent_namespace(acme), agent_namespace(acme_eu)) == ("acme", "acme-eu")
    longest = agent_case_id("x" * 63, "t-1")
    assert len(longest) == 80 and agent_namespace(longest) == "x" * 63
    assert agent_case_id("acme", "t-1") == acme  # stable: a retry finds its case


@pytest.mark.parametrize(
    ("case_id", "tenant", "owner"),
    [
        ("agt_acme_abc", "globex", "tenant acme's"),
        ("agt_acme_abc", "acme-eu", "tenant acme's"),
        ("agt_acme-eu_abc", "acme", "tenant acme-eu's"),
        ("agt_acme", "acme", "no tenant's"),
        ("agt__abc", "acme", "no tenant's"),
    ],
)
def test_the_case_model_refuses_another_tenants_agent_case_id(
    case_id: str, tenant: str, owner: str
) -> None:
    case = raw_case("case-0001", tenant_id=tenant)
    with pytest.raises(InvalidRequest, match=re.escape(owner)) as refused_case:
        parse_case({**case, "case_id": case_id})
    assert f"tenant {tenant} cannot use it" in str(refused_case.value)


def test_the_case_model_accepts_an_agent_case_id_for_its_own_tenant_and_other_ids() -> None:
    case = raw_case("case-0001")
    for case_id in ("agt_acme_abc", legacy_agent_case_id("globex", "t-1"), "agt-anything"):
        assert parse_case({**case, "case_id": case_id}).case_id == case_id


def test_a_draft_is_written_only_under_its_own_tenants_id(tools: AgentTools) -> None:
    with pytest.raises(ValueError, match="not an agent case id of tenant globex"):
        tools.drafts.create(
            case_id=agent_case_id("acme", "t-1"),
            tenant_id="globex",
            request_id="t-1",
            digest="sha256:" + "0" * 64,
            parameters={"order": {}, "reserve": {}, "refund": {}, "shipment": {}},
        )


def test_a_draft_is_stored_under_its_tenant_first(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    assert case_id == agent_case_id("acme", PROPOSAL["request_id"])
    key = {"tenant_id": {"S": "acme"}, "case_id": {"S": case_id}}
    stored = boto3.client("dynamodb").get_item(TableName=tools.drafts.table_name, Key=key)
    assert stored["Item"]["request_id"] == {"S": PROPOSAL["request_id"]}


def test_another_tenants_agent_case_id_is_not_found_without_a_read(
    tools: AgentTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not even read: an IAM condition on the drafts' leading key may scope a tenant's
    principal to its own drafts, and the answer must stay NOT_FOUND then."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    globex = AgentTools(**{**tools.__dict__, "tenant_id": "globex"})
    reads: list[str] = []
    monkeypatch.setattr(globex.drafts, "get", reads.append)
    assert refused(globex, "get_replacement", {"case_id": case_id}).code is ErrorCode.NOT_FOUND
    assert refused(globex, "start_replacement", {"case_id": case_id}).code is ErrorCode.NOT_FOUND
    assert reads == []


def test_two_requests_that_share_a_code_are_a_conflict_never_one_case(tools: AgentTools) -> None:
    """The 60-bit code of two requests of one tenant may (with probability below n^2/2^61)
    coincide: the second request is refused, never answered with the first one's draft."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    boto3.client("dynamodb").update_item(
        TableName=tools.drafts.table_name,
        Key={"tenant_id": {"S": "acme"}, "case_id": {"S": case_id}},
        UpdateExpression="SET request_id = :other",
        ExpressionAttributeValues={":other": {"S": "ticket-1:another"}},
    )
    error = refused(tools, "propose_replacement", PROPOSAL)
    assert error.code is ErrorCode.CONFLICT and "another request_id" in error.message


# --- statuses come from the draft's own records ------------------------------------------------
def _record(tools: AgentTools, case_id: str, **fields: Any) -> None:
    execution = f"{tools.state_machine_arn}:{case_id}".replace(":stateMachine:", ":execution:")
    item = {"case_id": case_id, "outcome": "COMPLETED", "execution_arn": execution, **fields}
    boto3.client("dynamodb").put_item(TableName=tools.cases.table_name, Item=to_item(item))


def _approved(tools: AgentTools) -> tuple[str, dict[str, Any]]:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id)
    draft = tools.drafts.get(case_id)
    assert draft is not None
    return case_id, draft


@pytest.mark.parametrize(
    "whose",
    [
        {"tenant_id": "globex", "digest": "same"},  # another tenant's, whatever digest
        {"tenant_id": "acme", "digest": "sha256:" + "1" * 64},  # this tenant, other parameters
    ],
)
def test_a_case_record_that_is_not_the_drafts_is_a_conflict(
    tools: AgentTools, whose: dict[str, str]
) -> None:
    """Step Functions forgot the execution; the case record under the id is another case's:
    its outcome is never reported, and nothing starts."""
    case_id, draft = _approved(tools)
    digest = draft["digest"] if whose["digest"] == "same" else whose["digest"]
    _record(tools, case_id, tenant_id=whose["tenant_id"], digest=digest)

    for tool in ("get_replacement", "start_replacement"):
        error = refused(tools, tool, {"case_id": case_id})
        assert error.code is ErrorCode.CONFLICT, (tool, error.message)
        assert "new request_id" in error.message and "COMPLETED" not in error.message
    assert executions(tools) == []


def test_an_owner_execution_that_runs_another_case_is_a_conflict(tools: AgentTools) -> None:
    """The draft's own record names an execution whose input is another tenant's case."""
    case_id, draft = _approved(tools)
    other = raw_case("other-case", tenant_id="globex")
    other["approval"] = {**other["approval"], "approved_by": "boss@globex"}
    started = tools.stepfunctions.start_execution(
        stateMachineArn=tools.state_machine_arn, name="elsewhere", input=json.dumps(other)
    )
    _record(
        tools,
        case_id,
        tenant_id="acme",
        digest=draft["digest"],
        outcome="IN_PROGRESS",
        execution_arn=started["executionArn"],
    )
    error = refused(tools, "get_replacement", {"case_id": case_id})
    assert error.code is ErrorCode.CONFLICT


def test_an_execution_under_the_drafts_name_with_another_input_is_a_conflict(
    tools: AgentTools,
) -> None:
    case_id, _ = _approved(tools)
    foreign = raw_case("case-0001", tenant_id="globex")
    foreign["case_id"] = case_id  # what a caller outside the tools can send
    tools.stepfunctions.start_execution(
        stateMachineArn=tools.state_machine_arn, name=case_id, input=json.dumps(foreign)
    )
    for tool in ("get_replacement", "start_replacement"):
        assert refused(tools, tool, {"case_id": case_id}).code is ErrorCode.CONFLICT
    assert len(executions(tools)) == 1


# --- drafts proposed before ids carried the tenant ---------------------------------------------
def _legacy(tools: AgentTools, request: dict[str, Any] = PROPOSAL, tenant: str = "acme") -> str:
    client = boto3.client("dynamodb")
    return legacy_drafts.propose(client, TABLE_NAMES["LEGACY_DRAFTS_TABLE"], tenant, request)


def test_a_retried_proposal_after_the_upgrade_gets_its_old_draft_never_a_second(
    tools: AgentTools,
) -> None:
    old_id = _legacy(tools)
    again = tools.call("propose_replacement", PROPOSAL)
    assert (again["case_id"], again["created"]) == (old_id, False)
    assert boto3.client("dynamodb").scan(TableName=tools.drafts.table_name)["Count"] == 0
    changed = refused(tools, "propose_replacement", {**PROPOSAL, "amount_minor": 2100})
    assert changed.code is ErrorCode.CONFLICT and "already used" in changed.message
    # A new request is a new case, under the new ids.
    other = tools.call("propose_replacement", agent_proposal("4712"))
    assert other["case_id"] == agent_case_id("acme", "ticket-4712:replacement")


def test_an_old_draft_is_followed_approved_and_started_where_it_is(tools: AgentTools) -> None:
    old_id = _legacy(tools)
    assert tools.call("get_replacement", {"case_id": old_id})["status"] == "APPROVAL_PENDING"
    approve(tools, old_id)  # DraftStore.approve: into the old table, under its old key
    started = tools.call("start_replacement", {"case_id": old_id})
    assert started["started"] is True
    (execution,) = executions(tools)
    assert execution["name"] == old_id


def test_an_old_draft_approved_before_the_upgrade_starts(tools: AgentTools) -> None:
    old_id = _legacy(tools)
    draft = tools.drafts.get(old_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    signed = sign_locally(case)["approval"]
    table = TABLE_NAMES["LEGACY_DRAFTS_TABLE"]
    legacy_drafts.approve(boto3.client("dynamodb"), table, old_id, draft["digest"], signed)

    assert tools.call("start_replacement", {"case_id": old_id})["started"] is True


def test_another_tenants_old_draft_is_not_found(tools: AgentTools) -> None:
    """An old id names no tenant: the draft is read, and its tenant decides."""
    old_id = _legacy(tools, tenant="globex")
    for tool in ("get_replacement", "start_replacement"):
        assert refused(tools, tool, {"case_id": old_id}).code is ErrorCode.NOT_FOUND


def test_a_request_proposed_in_both_forms_during_the_upgrade_starts_once(
    tools: AgentTools,
) -> None:
    """The new code made the request's `agt_` draft while the old code, still serving, made its
    `agt-` one: the new draft does not start; the old one does."""
    new_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    old_id = _legacy(tools)
    approve(tools, new_id)
    approve(tools, old_id)

    error = refused(tools, "start_replacement", {"case_id": new_id})
    assert error.code is ErrorCode.CONFLICT and f"start case {old_id} instead" in error.message
    assert executions(tools) == []
    assert tools.call("start_replacement", {"case_id": old_id})["started"] is True
    assert [e["name"] for e in executions(tools)] == [old_id]


def test_the_store_reads_each_id_where_its_draft_is(tools: AgentTools) -> None:
    store: DraftStore = tools.drafts
    legacy = legacy_agent_case_id("acme", "t-1")
    assert store.location(legacy) == (store.legacy_table_name, {"case_id": legacy})
    new = agent_case_id("acme", "t-1")
    assert store.location(new) == (store.table_name, {"tenant_id": "acme", "case_id": new})
    assert store.location("case-0001") is None and store.location("agt_nobody") is None
