"""The agent tools' logic (saga.agent.tools) on moto: identity, conflicts, approval, idempotent
start, typed errors. moto's Step Functions here records executions without running them, which
is what these tests count; the end-to-end run is tests/e2e/test_agent_mcp.py."""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from jsonschema import Draft202012Validator

from local_aws.approval_keys import create_local_key, local_key_arn, sign_locally
from saga.agent.drafts import DraftConflict, DraftStore, draft_case
from saga.agent.owned import started_input
from saga.agent.schemas import TOOL_NAMES, input_schema, tool_definitions
from saga.agent.tools import AgentTools, ErrorCode, ToolError
from saga.approval_keys import KmsPublicKeys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.dynamodb import to_item
from saga.identity import agent_case_id
from tests.tools_harness import (
    APPROVAL_KEYS_JSON,
    agent_proposal,
)

PROPOSAL = agent_proposal("4711")


def refused(tools: AgentTools, tool: str, arguments: dict[str, Any]) -> ToolError:
    with pytest.raises(ToolError) as caught:
        tools.call(tool, arguments)
    return caught.value


def approve(tools: AgentTools, case_id: str, **signing: Any) -> dict[str, Any]:
    """What `sagactl case approve --case` stores: the approval signed by the local key."""
    draft = tools.drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    signed = sign_locally(case, **signing)
    tools.drafts.approve(case_id, digest=draft["digest"], approval=signed["approval"])
    return dict(signed["approval"])


def executions(tools: AgentTools) -> list[dict[str, Any]]:
    listed = tools.stepfunctions.list_executions(stateMachineArn=tools.state_machine_arn)
    return list(listed["executions"])


def test_every_tool_schema_is_strict_json_schema() -> None:
    assert set(TOOL_NAMES) == {"propose_replacement", "get_replacement", "start_replacement"}
    for tool in tool_definitions():
        Draft202012Validator.check_schema(tool["inputSchema"])
        assert tool["inputSchema"]["additionalProperties"] is False
        assert tool["description"]
    schema = input_schema("propose_replacement")
    assert "tenant_id" not in schema["properties"] and "tenant" not in schema["properties"]
    assert schema["properties"]["amount_minor"]["type"] == "integer"
    validator = Draft202012Validator(schema)
    assert validator.is_valid(PROPOSAL)
    assert not validator.is_valid({**PROPOSAL, "tenant_id": "globex"})
    assert not validator.is_valid({**PROPOSAL, "amount_minor": 20.5})
    assert not validator.is_valid({**PROPOSAL, "address": {**PROPOSAL["address"], "x": 1}})


def test_the_same_request_returns_the_same_draft_and_writes_it_once(tools: AgentTools) -> None:
    first = tools.call("propose_replacement", PROPOSAL)
    again = tools.call("propose_replacement", deepcopy(PROPOSAL))

    assert first["case_id"] == again["case_id"] == agent_case_id("acme", PROPOSAL["request_id"])
    assert (first["created"], again["created"]) == (True, False)
    assert first["status"] == again["status"] == "APPROVAL_PENDING"
    scanned = boto3.client("dynamodb").scan(TableName=tools.drafts.table_name)["Items"]
    assert len(scanned) == 1
    # The cases table is untouched until a start.
    assert boto3.client("dynamodb").scan(TableName=tools.cases.table_name)["Count"] == 0


def test_the_same_request_id_with_other_parameters_is_a_conflict(tools: AgentTools) -> None:
    tools.call("propose_replacement", PROPOSAL)
    error = refused(tools, "propose_replacement", {**PROPOSAL, "amount_minor": 2500})
    assert error.code is ErrorCode.CONFLICT
    assert "already used" in error.message
    draft = tools.drafts.get(agent_case_id("acme", PROPOSAL["request_id"]))
    assert draft is not None and draft["parameters"]["refund"]["amount_minor"] == 2000


def test_a_new_request_id_is_a_new_case_even_with_identical_parameters(tools: AgentTools) -> None:
    first = tools.call("propose_replacement", PROPOSAL)
    second = tools.call("propose_replacement", {**PROPOSAL, "request_id": "ticket-4711:second"})
    assert first["case_id"] != second["case_id"]


def test_the_tenant_is_the_servers_and_other_tenants_cases_are_not_found(
    tools: AgentTools,
) -> None:
    proposed = tools.call("propose_replacement", PROPOSAL)
    assert tools.drafts.get(proposed["case_id"])["tenant_id"] == "acme"  # type: ignore[index]
    globex = AgentTools(**{**tools.__dict__, "tenant_id": "globex"})
    # The same request id under another tenant is another case, and acme's is invisible.
    assert globex.call("propose_replacement", PROPOSAL)["case_id"] != proposed["case_id"]
    error = refused(globex, "get_replacement", {"case_id": proposed["case_id"]})
    assert error.code is ErrorCode.NOT_FOUND
    assert refused(tools, "propose_replacement", {**PROPOSAL, "tenant_id": "globex"}).code is (
        ErrorCode.INVALID_REQUEST
    )


def test_bad_arguments_are_invalid_requests_naming_the_field(tools: AgentTools) -> None:
    error = refused(tools, "propose_replacement", {**PROPOSAL, "currency": "XTS"})
    assert error.code is ErrorCode.INVALID_REQUEST
    assert "refund.currency" in error.message
    error = refused(tools, "propose_replacement", {**PROPOSAL, "quantity": "1"})
    assert error.code is ErrorCode.INVALID_REQUEST and "quantity" in error.message
    assert refused(tools, "get_replacement", {"case_id": "no such/id"}).code is (
        ErrorCode.INVALID_REQUEST
    )
    assert refused(tools, "delete_everything", {}).code is ErrorCode.INVALID_REQUEST
    assert boto3.client("dynamodb").scan(TableName=tools.drafts.table_name)["Count"] == 0


def test_an_unapproved_case_is_not_started(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    error = refused(tools, "start_replacement", {"case_id": case_id})
    assert error.code is ErrorCode.NOT_APPROVED
    assert f"sagactl case approve --case {case_id}" in error.message
    assert executions(tools) == []
    assert refused(tools, "start_replacement", {"case_id": "agt-nope"}).code is (
        ErrorCode.NOT_FOUND
    )


def test_a_forged_approval_is_not_started(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    draft = tools.drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    # Signed by globex's approver, presented as acme's supervisor.
    forged = sign_locally(case, signer=("globex", "boss@globex"))
    tools.drafts.approve(case_id, digest=draft["digest"], approval=forged["approval"])

    error = refused(tools, "start_replacement", {"case_id": case_id})
    assert error.code is ErrorCode.NOT_APPROVED
    assert "AuthorizationDenied" in error.message
    assert executions(tools) == []


def test_an_approval_can_be_stored_once_and_only_for_the_digest_seen(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    draft = tools.drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    signed = sign_locally(case)["approval"]
    with pytest.raises(DraftConflict, match="changed since it was read"):
        tools.drafts.approve(case_id, digest="sha256:" + "0" * 64, approval=signed)
    tools.drafts.approve(case_id, digest=draft["digest"], approval=signed)
    tools.drafts.approve(case_id, digest=draft["digest"], approval=signed)  # a repeat: no-op
    other = {**signed, "signed_at": "2026-12-01T00:00:00Z"}
    with pytest.raises(DraftConflict, match="approved already by supervisor@acme"):
        tools.drafts.approve(case_id, digest=draft["digest"], approval=other)


def test_two_starts_give_one_execution(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    assert tools.call("get_replacement", {"case_id": case_id})["status"] == "APPROVAL_PENDING"
    approve(tools, case_id)
    assert tools.call("get_replacement", {"case_id": case_id})["status"] == "APPROVED"

    first = tools.call("start_replacement", {"case_id": case_id})
    second = tools.call("start_replacement", {"case_id": case_id})

    assert (first["started"], second["started"]) == (True, False)
    (execution,) = executions(tools)
    assert execution["name"] == case_id
    assert first["execution_arn"] == second["execution_arn"] == execution["executionArn"]
    sent = tools.stepfunctions.describe_execution(executionArn=execution["executionArn"])
    started_case = json.loads(sent["input"])
    assert started_case["tenant_id"] == "acme"
    assert started_case["approval"]["approved_by"] == "supervisor@acme"
    assert started_case["refund"] == {
        "payment_reference": "pay-4711",
        "amount_minor": 2000,
        "currency": "USD",
    }


def test_an_expired_start_deadline_is_not_approved(tools: AgentTools) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id, start_by="2020-01-01T00:00:00Z")
    error = refused(tools, "start_replacement", {"case_id": case_id})
    assert error.code is ErrorCode.NOT_APPROVED and "has passed" in error.message
    assert executions(tools) == []


def test_a_service_that_does_not_answer_is_unavailable(tools: AgentTools) -> None:
    nowhere = DraftStore(tools.drafts.client, "nope", legacy_table_name="nope")
    broken = AgentTools(**{**tools.__dict__, "drafts": nowhere})
    error = refused(broken, "propose_replacement", PROPOSAL)
    assert error.code is ErrorCode.UNAVAILABLE
    assert "Traceback" not in error.message and "same arguments" in error.message


# --- a case that started stays answered as started (review: a retry must never be told "nothing
# was started" about a running case, or the agent's natural next step is a second case) --------
NOW = 1_900_000_000.0  # 2030-03-17T17:46:40Z


def _approved_with_deadline(
    tools: AgentTools, now: list[float], start_by: str
) -> tuple[AgentTools, str]:
    """The tools on a clock the test moves, and a case proposed and approved to start by then."""
    agent = AgentTools(**{**tools.__dict__, "clock": lambda: now[0]})
    case_id = agent.call("propose_replacement", PROPOSAL)["case_id"]
    approve(agent, case_id, start_by=start_by)
    return agent, case_id


def test_a_retried_start_after_the_start_deadline_answers_the_running_execution(
    tools: AgentTools,
) -> None:
    now = [NOW]
    agent, case_id = _approved_with_deadline(tools, now, "2030-03-17T18:00:00Z")
    first = agent.call("start_replacement", {"case_id": case_id})
    now[0] = NOW + 86_400  # the answer was lost; the agent retries the next day

    again = agent.call("start_replacement", {"case_id": case_id})

    assert (first["started"], again["started"]) == (True, False)
    assert again["execution_arn"] == first["execution_arn"]
    assert len(executions(agent)) == 1


def test_a_start_whose_answer_was_lost_is_found_by_a_retry_after_the_deadline(
    tools: AgentTools,
) -> None:
    now = [NOW]
    agent, case_id = _approved_with_deadline(tools, now, "2030-03-17T19:00:00Z")
    real_start = tools.stepfunctions.start_execution

    def started_but_answer_lost(**kwargs: Any) -> Any:
        real_start(**kwargs)
        raise ReadTimeoutError(endpoint_url="https://states.us-east-1.amazonaws.com")

    tools.stepfunctions.start_execution = started_but_answer_lost
    assert refused(agent, "start_replacement", {"case_id": case_id}).code is ErrorCode.UNAVAILABLE
    tools.stepfunctions.start_execution = real_start
    now[0] = NOW + 2 * 3600  # past the deadline by the time the agent retries

    again = agent.call("start_replacement", {"case_id": case_id})

    assert again["started"] is False and again["status"] == "RUNNING"
    assert len(executions(agent)) == 1


def test_a_retried_start_after_a_key_rotation_answers_the_running_execution(
    tools: AgentTools,
) -> None:
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id)
    first = tools.call("start_replacement", {"case_id": case_id})
    create_local_key(boto3.client("kms"), tenant="acme", approver="supervisor@acme", generation=2)
    keys = json.loads(APPROVAL_KEYS_JSON)
    keys["acme"]["supervisor@acme"] = {
        "current": local_key_arn("acme", "supervisor@acme", 2),
        "retired": [local_key_arn("acme", "supervisor@acme", 1)],
    }
    verifier = ApprovalVerifier(
        parse_trusted_keys(json.dumps(keys)),
        KmsPublicKeys(lambda: boto3.client("kms")),
        thresholds={},
    )
    rotated = AgentTools(**{**tools.__dict__, "approvals": verifier})

    again = rotated.call("start_replacement", {"case_id": case_id})

    assert (again["started"], again["execution_arn"]) == (False, first["execution_arn"])
    assert len(executions(tools)) == 1


def record_case(tools: AgentTools, case_id: str, execution_name: str, **fields: Any) -> str:
    """The case record ValidateCase and RecordOutcome leave for the approved draft, owned by
    the execution of that name (its ARN is returned)."""
    draft = tools.drafts.get(case_id)
    assert draft is not None
    arn = f"{tools.state_machine_arn}:{execution_name}".replace(":stateMachine:", ":execution:")
    record = {"case_id": case_id, "tenant_id": "acme", "digest": draft["digest"]}
    boto3.client("dynamodb").put_item(
        TableName=tools.cases.table_name,
        Item=to_item({**record, "execution_arn": arn, **fields}),
    )
    return arn


def test_a_case_whose_execution_was_forgotten_is_answered_from_its_record(
    tools: AgentTools,
) -> None:
    """Step Functions forgets an execution 90 days after it closed; the case record (no TTL)
    still says COMPLETED: get answers COMPLETED, start starts nothing and verifies nothing."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id, start_by="2020-01-01T00:00:00Z")  # long passed, and irrelevant now
    record_case(tools, case_id, "forgotten", outcome="COMPLETED")

    assert tools.call("get_replacement", {"case_id": case_id})["status"] == "COMPLETED"
    started = tools.call("start_replacement", {"case_id": case_id})
    assert (started["status"], started["started"]) == ("COMPLETED", False)
    assert executions(tools) == []


@pytest.mark.parametrize("forgotten", [False, True])
def test_a_resolved_case_answers_the_persons_decision(
    tools: AgentTools, forgotten: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `sagactl escalations resolve`, the agent learns the decision (and that it is
    final), not "ESCALATED ... a person decides": from the owning execution's case record, and
    from the record alone once Step Functions forgot the execution."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id)
    decision = {
        "by": "ops@acme",
        "decision": "refunded by bank transfer",
        "at": "2026-12-01T09:00:00Z",
    }
    arn = record_case(
        tools,
        case_id,
        case_id,
        outcome="ESCALATED",
        escalation={"reason": "OUTCOME_UNCERTAIN"},
        resolution={**decision, "settled_actions": []},
    )
    draft = tools.drafts.get(case_id)
    assert draft is not None
    succeeded = {"executionArn": arn, "status": "SUCCEEDED", "input": started_input(draft)}
    monkeypatch.setattr(tools.records, "describe", lambda _: None if forgotten else succeeded)

    answer = tools.call("get_replacement", {"case_id": case_id})

    assert answer["status"] == "RESOLVED"
    assert answer["resolution"] == decision
    assert answer["outcome"] == "ESCALATED" and answer["execution_arn"] == arn
    assert "a person decided" in answer["next"]


UNUSUAL_ARGUMENTS = [
    ("amount_minor", float("nan")),
    ("amount_minor", float("inf")),
    ("amount_minor", 2000.0),
    ("amount_minor", True),
    ("amount_minor", 10**40),
    ("quantity", 10**6),
    ("request_id", "x" * 10_000),
    ("request_id", "ticket\n1"),
    ("currency", "XTS"),
    ("sku", None),
    ("address", "1 Main St"),
    ("address", {**PROPOSAL["address"], "name": "A\u202eB"}),
    ("address", {**PROPOSAL["address"], "name": "\ud800"}),
    ("address", {**PROPOSAL["address"], "postal_code": "1\n"}),
    ("address", {**PROPOSAL["address"], "tenant_id": "globex"}),
    ("tenant_id", "globex"),
    ("approval", {"approved_by": "supervisor@acme"}),
]


@pytest.mark.parametrize(("field", "value"), UNUSUAL_ARGUMENTS)
def test_unusual_arguments_are_typed_refusals_that_write_nothing(
    tools: AgentTools, field: str, value: Any
) -> None:
    error = refused(tools, "propose_replacement", {**PROPOSAL, field: value})
    assert error.code is ErrorCode.INVALID_REQUEST, error.message
    assert "Traceback" not in error.message and len(error.message) < 2000
    assert boto3.client("dynamodb").scan(TableName=tools.drafts.table_name)["Count"] == 0
