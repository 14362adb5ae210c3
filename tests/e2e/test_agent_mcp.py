"""An agent drives a replacement through `sagactl mcp` with the `mcp` package's own client
(ClientSession over stdio, and over streamable HTTP against `sagactl mcp --http`; the server is
a real `sagactl mcp` process) against the local AWS: propose, a person approves (`sagactl case
approve --case ... --yes`), start, poll until COMPLETED, with exactly one refund and one
shipment whatever the agent retries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from local_aws.aws_calls import acting_as, recording_aws_calls
from local_aws.environment import LocalAws
from saga.approval_keys import parse_trusted_keys
from sagactl.operations.agent_tools import agent_tools
from sagactl.target import local_target
from tests.cli.sagactl_helpers import Sagactl
from tests.e2e.mcp_agent import Session, call, count, follow, server, with_session
from tests.tools_harness import agent_proposal

PROPOSAL = agent_proposal("9001")


@pytest.fixture
def outputs(local_aws: LocalAws, tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    local_aws.write_outputs(path)
    return path


def test_an_agent_takes_a_replacement_from_proposal_to_completion_once(
    local_aws: LocalAws, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = server(local_aws, outputs)

    async def propose_and_lose_the_answer(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        for tool in listed.tools:
            Draft202012Validator.check_schema(tool.input_schema)
            assert tool.input_schema["additionalProperties"] is False
        assert {tool.name for tool in listed.tools} == {
            "propose_replacement",
            "get_replacement",
            "start_replacement",
        }
        return await call(session, "propose_replacement", **PROPOSAL)

    lost = with_session(params, propose_and_lose_the_answer)

    async def retry_then_conflict_then_start_early(session: ClientSession) -> dict[str, Any]:
        again = await call(session, "propose_replacement", **PROPOSAL)  # a new tool-call id
        changed = await call(session, "propose_replacement", **{**PROPOSAL, "amount_minor": 2100})
        early = await call(session, "start_replacement", case_id=again["case_id"])
        return {"again": again, "changed": changed, "early": early}

    second = with_session(params, retry_then_conflict_then_start_early)
    case_id = lost["case_id"]
    assert second["again"]["case_id"] == case_id
    assert (lost["created"], second["again"]["created"]) == (True, False)
    assert second["changed"]["error"]["code"] == "CONFLICT"
    assert second["early"]["error"]["code"] == "NOT_APPROVED"
    assert f"sagactl case approve --case {case_id}" in second["early"]["error"]["message"]

    approved = Sagactl(capsys)(
        "case", "approve", "--case", case_id, "--yes", "--outputs", str(outputs)
    )
    assert approved.code == 0, approved.err
    assert "supervisor@acme" in approved.out

    async def start_twice_and_follow(session: ClientSession) -> list[dict[str, Any]]:
        first = await call(session, "start_replacement", case_id=case_id)
        repeat = await call(session, "start_replacement", case_id=case_id)
        return [first, repeat, *await follow(session, case_id)]

    first, repeat, *polled = with_session(params, start_twice_and_follow)
    assert (first["started"], repeat["started"]) == (True, False)
    assert first["execution_arn"] == repeat["execution_arn"]
    assert polled[-1]["status"] == "COMPLETED", polled[-1]
    executions = local_aws.client("stepfunctions").list_executions(
        stateMachineArn=local_aws.state_machine_arn
    )["executions"]
    assert [e["name"] for e in executions] == [case_id]
    assert count(local_aws, "PaymentsTableName", case_id) == 1
    assert count(local_aws, "ShipmentsTableName", case_id) == 1
    record = local_aws.client("dynamodb").get_item(
        TableName=local_aws.outputs["CasesTableName"], Key={"case_id": {"S": case_id}}
    )["Item"]
    assert record["tenant_id"]["S"] == "acme"


def test_a_forged_or_unapproved_case_starts_nothing(local_aws: LocalAws, outputs: Path) -> None:
    params = server(local_aws, outputs)

    async def propose(session: ClientSession) -> dict[str, Any]:
        return await call(session, "propose_replacement", **PROPOSAL)

    case_id = with_session(params, propose)["case_id"]
    # A forged approval written straight into the drafts table: right digest, made-up signature.
    ddb = local_aws.client("dynamodb")
    key = {"tenant_id": {"S": "acme"}, "case_id": {"S": case_id}}
    draft = ddb.get_item(TableName=local_aws.outputs["DraftsTableName"], Key=key)["Item"]
    forged = {
        "revision": {"N": "1"},
        "approved_by": {"S": "supervisor@acme"},
        "digest": draft["digest"],
        "signed_at": {"S": "2026-11-30T00:00:00Z"},
        "key_id": {"S": "arn:aws:kms:us-east-1:123456789012:key/made-up"},
        "signature": {"S": "MEUCIQD" + "A" * 60},
    }
    ddb.update_item(
        TableName=local_aws.outputs["DraftsTableName"],
        Key=key,
        UpdateExpression="SET approval = :a",
        ExpressionAttributeValues={":a": {"M": forged}},
    )

    async def start(session: ClientSession) -> dict[str, Any]:
        return await call(session, "start_replacement", case_id=case_id)

    refused = with_session(params, start)
    assert refused["error"]["code"] == "NOT_APPROVED", refused
    assert (
        local_aws.client("stepfunctions").list_executions(
            stateMachineArn=local_aws.state_machine_arn
        )["executions"]
        == []
    )
    assert count(local_aws, "PaymentsTableName", case_id) == 0
    assert json.loads(json.dumps(refused))["error"]["message"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server(local_aws: LocalAws, outputs: Path, tmp_path: Path) -> Iterator[str]:
    """`sagactl mcp --http` on a free loopback port: its MCP endpoint's URL once it listens."""
    port = free_port()
    log = tmp_path / "mcp-http.log"
    env = {**local_aws.environment, "SAGA_LOCAL_OUTPUTS": str(outputs), "PATH": os.environ["PATH"]}
    command = ["mcp", "--tenant", "acme", "--http", "--port", str(port)]
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "sagactl.cli", *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        for _ in range(600):  # bounded: the server imports boto3, mcp and uvicorn first
            assert process.poll() is None, log.read_text()
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("sagactl mcp --http never listened")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def with_http_session(url: str, body: Session) -> Any:
    """One agent invocation over streamable HTTP: a new client session, `body` run in it."""

    async def main() -> Any:
        # trust_env=False: no proxy from the environment between the test and loopback.
        async with (
            httpx2.AsyncClient(trust_env=False, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await body(session)

    return anyio.run(main)


def test_an_agent_over_streamable_http_proposes_and_follows_a_replacement(
    local_aws: LocalAws, outputs: Path, http_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def propose_and_get(session: ClientSession) -> list[dict[str, Any]]:
        listed = await session.list_tools()
        assert len(listed.tools) == 3
        proposed = await call(session, "propose_replacement", **PROPOSAL)
        return [proposed, await call(session, "get_replacement", case_id=proposed["case_id"])]

    proposed, pending = with_http_session(http_server, propose_and_get)
    case_id = proposed["case_id"]
    assert (proposed["created"], pending["status"]) == (True, "APPROVAL_PENDING")
    approved = Sagactl(capsys)(
        "case", "approve", "--case", case_id, "--yes", "--outputs", str(outputs)
    )
    assert approved.code == 0, approved.err

    async def retry_start_and_follow(session: ClientSession) -> list[dict[str, Any]]:
        again = await call(session, "propose_replacement", **PROPOSAL)  # another session
        started = await call(session, "start_replacement", case_id=case_id)
        return [again, started, *await follow(session, case_id)]

    again, started, *polled = with_http_session(http_server, retry_start_and_follow)
    assert (again["case_id"], again["created"], started["started"]) == (case_id, False, True)
    assert polled[-1]["status"] == "COMPLETED", polled[-1]
    assert count(local_aws, "PaymentsTableName", case_id) == 1
    assert count(local_aws, "ShipmentsTableName", case_id) == 1


def test_the_http_server_refuses_a_request_for_another_host(http_server: str) -> None:
    # DNS rebinding: a page on another origin that resolves to 127.0.0.1 reaches the port, but
    # its Host header is not the loopback's.
    request = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Host": "attacker.example", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(trust_env=False, timeout=30) as http:
        response = http.post(http_server, json=request, headers=headers)
    assert response.status_code == 421, response.text


def test_the_server_reads_its_tenants_configuration_and_nothing_of_another_tenant(
    local_aws: LocalAws, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sagactl mcp --tenant T` serves with T's agent configuration parameter (provisioned from
    the template as the stack writes it): the keys and thresholds ValidateCase trusts for T,
    and no other tenant's approvers. A tenant without one is refused before anything serves."""
    target = local_target(outputs)
    with recording_aws_calls() as calls, acting_as("agent hooli"):
        tools = agent_tools(target, "hooli")
    assert [(c.service, c.operation) for c in calls] == [("ssm", "GetParameter")]
    validate_case = local_aws.client("lambda").get_function_configuration(
        FunctionName=local_aws.outputs["ValidateCaseFunctionName"]
    )["Environment"]["Variables"]
    trusted = parse_trusted_keys(
        validate_case["APPROVAL_KEYS"], validate_case["APPROVAL_KEY_ALIASES"]
    )
    assert tools.approvals.trusted == {"hooli": trusted["hooli"]}
    assert tools.approvals.thresholds == {
        "hooli": json.loads(validate_case["APPROVAL_THRESHOLDS"])["hooli"]
    }
    refused = Sagactl(capsys)("mcp", "--tenant", "initech", "--outputs", str(outputs))
    assert refused.code == 2, refused.err
    assert "tenant 'initech' is not configured" in refused.err
    assert "acme, globex, hooli" in refused.err
