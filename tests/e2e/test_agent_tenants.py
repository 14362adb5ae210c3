"""An agent sees and touches only its own tenant's cases (docs/design.md §10), driven as agents
drive it: the `mcp` package's client against real `sagactl mcp --tenant` processes for two
tenants, on the local AWS.

The reproduction: tenant globex runs its own case (signed by its own approver) under the id
acme's agent gets for a request (globex can compute it: request ids are ticket numbers). However
far globex's case gets (completed, held running, escalated), acme's agent must be told CONFLICT
(with what to do), never globex's state as its own, and nothing may happen for acme."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import ClientSession, StdioServerParameters

from local_aws.approval_keys import local_key_arn, local_private_key, sign_locally
from local_aws.environment import LocalAws
from saga.agent.config import agent_config_parameter
from saga.agent.drafts import draft_case
from saga.approvals import signed_message
from saga.dynamodb import from_item
from saga.identity import sha256_hex
from tests import legacy_drafts
from tests.cli.sagactl_helpers import Sagactl
from tests.e2e.held_functions import function_held
from tests.e2e.mcp_agent import call, count, follow, server, with_session
from tests.tools_harness import ADDRESS, SIGNED_AT, agent_proposal

# How far globex's case under acme's id gets -> the ticket acme's agent works.
TICKETS = {"completed": "7101", "running": "7102", "escalated": "7103"}
FAULTS: dict[str, dict[str, list[str]] | None] = {
    "completed": None,
    "running": None,
    "escalated": {"refund": ["reject"]},  # refund refused: released and escalated
}
GLOBEX_PAYMENT = "pay-globex-{ticket}"


@pytest.fixture
def outputs(local_aws: LocalAws, tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    local_aws.write_outputs(path)
    return path


def globex_case(case_id: str, ticket: str, kind: str) -> dict[str, Any]:
    """Globex's own case under `case_id`, approved and signed by globex's approver."""
    case: dict[str, Any] = {
        "case_id": case_id,
        "tenant_id": "globex",
        "order": {"order_id": f"gx-ord-{ticket}", "customer_id": "gx-cus-1"},
        "reserve": {"sku": "SKU-RED-MUG", "quantity": 1},
        "refund": {
            "payment_reference": GLOBEX_PAYMENT.format(ticket=ticket),
            "amount_minor": 999,
            "currency": "EUR",
        },
        "shipment": {"address": copy.deepcopy(ADDRESS)},
    }
    if FAULTS[kind]:
        case["sandbox"] = {"faults": FAULTS[kind]}
    return {**case, "approval": signed_outside_the_tools(case, "globex", "ops@globex")}


def signed_outside_the_tools(case: dict[str, Any], tenant: str, approver: str) -> dict[str, Any]:
    """An approval by `approver` (their own local key) with the digest computed as anyone can
    compute it, SHA-256 of the canonical JSON of the parameters: no rule of the case model is
    asked (`sagactl case approve` would refuse a case it finds invalid; a caller with a client
    of its own need not ask it)."""
    parameters = {key: case[key] for key in ("case_id", "tenant_id", "order", "reserve")}
    parameters |= {"refund": case["refund"], "shipment": case["shipment"], "revision": 1}
    digest = "sha256:" + sha256_hex(parameters)
    message = signed_message(
        case_id=case["case_id"],
        tenant_id=tenant,
        digest=digest,
        revision=1,
        approved_by=approver,
        signed_at=SIGNED_AT,
        start_by=None,
    )
    signature = local_private_key(tenant, approver).sign(message, ec.ECDSA(hashes.SHA256()))
    return {
        "revision": 1,
        "approved_by": approver,
        "digest": digest,
        "signed_at": SIGNED_AT,
        "key_id": local_key_arn(tenant, approver),
        "signature": base64.b64encode(signature).decode("ascii"),
    }


def approve(capsys: pytest.CaptureFixture[str], outputs: Path, case_id: str) -> None:
    approved = Sagactl(capsys)(
        "case", "approve", "--case", case_id, "--yes", "--outputs", str(outputs)
    )
    assert approved.code == 0, approved.err


def get_and_start_each(ids: dict[str, str]) -> Any:
    async def body(session: ClientSession) -> dict[str, dict[str, Any]]:
        answers = {}
        for kind, case_id in ids.items():
            answers[f"{kind}/get"] = await call(session, "get_replacement", case_id=case_id)
            answers[f"{kind}/start"] = await call(session, "start_replacement", case_id=case_id)
            answers[f"{kind}/get-again"] = await call(session, "get_replacement", case_id=case_id)
        return answers

    return body


def run_globex_under(
    local: LocalAws,
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    hold: str,
    acme: StdioServerParameters,
) -> tuple[dict[str, str], Any]:
    """Globex's cases under `ids`: the completed and escalated ones run to their end, the
    running one is held at `hold` while acme's agent gets and starts each of `ids`;
    (globex's execution ARNs, acme's answers)."""
    arns: dict[str, str] = {}
    for kind in ("completed", "escalated"):
        arns[kind] = local.start_case(globex_case(ids[kind], TICKETS[kind], kind))
        local.wait_for_execution(arns[kind])
    with function_held(monkeypatch, hold) as waiting:
        arns["running"] = local.start_case(
            globex_case(ids["running"], TICKETS["running"], "running")
        )
        assert waiting.wait(timeout=60), f"globex's case never reached {hold}"
        asked = with_session(acme, get_and_start_each(ids))
    local.wait_for_execution(arns["running"])
    return arns, asked


def assert_conflicts_only(answers: dict[str, dict[str, Any]]) -> None:
    """Every answer is a CONFLICT that says what to do and tells nothing of globex's case."""
    for asked, answer in answers.items():
        error = answer.get("error")
        assert isinstance(error, dict) and error["code"] == "CONFLICT", (asked, answer)
        message = error["message"]
        assert "new request_id" in message, (asked, message)
        for secret in ("globex", "gx-", "EUR", "ValidateCase", "IssueRefund", "COMPLETED"):
            assert secret not in message, (asked, message)


def test_another_tenants_case_under_the_id_acmes_agent_gets_is_a_conflict(
    local_aws: LocalAws,
    outputs: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acme = server(local_aws, outputs, "acme")

    async def propose(session: ClientSession) -> dict[str, str]:
        ids = {}
        for kind, ticket in TICKETS.items():
            proposed = await call(session, "propose_replacement", **agent_proposal(ticket))
            ids[kind] = str(proposed["case_id"])
        return ids

    ids = with_session(acme, propose)
    for case_id in ids.values():
        approve(capsys, outputs, case_id)

    arns, answers = run_globex_under(local_aws, ids, monkeypatch, "ValidateCase", acme)

    assert_conflicts_only(answers)
    sfn = local_aws.client("stepfunctions")
    for kind, arn in arns.items():
        # The id is acme's agent namespace: globex's case is refused before any effect.
        described = sfn.describe_execution(executionArn=arn)
        assert (described["status"], described.get("error")) == ("FAILED", "InvalidRequest"), kind
        assert "tenant acme" in described["cause"], described["cause"]
    for case_id in ids.values():
        assert count(local_aws, "PaymentsTableName", case_id) == 0
        assert count(local_aws, "ShipmentsTableName", case_id) == 0
        assert count(local_aws, "CasesTableName", case_id) == 0
        assert count(local_aws, "LedgerTableName", case_id) == 0
    # After globex's executions ended, acme's agent is still told the conflict.
    assert_conflicts_only(with_session(acme, get_and_start_each(ids)))


def payments_of(local: LocalAws, payment_reference: str) -> int:
    items = local.client("dynamodb").scan(
        TableName=local.outputs["PaymentsTableName"],
        FilterExpression="payment_reference = :r",
        ExpressionAttributeValues={":r": {"S": payment_reference}},
        ConsistentRead=True,
    )["Items"]
    return len(items)


def test_drafts_proposed_before_the_upgrade_keep_working_and_stay_acmes(
    local_aws: LocalAws,
    outputs: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Drafts written by the code before ids carried the tenant (tests/legacy_drafts.py, into
    the old table under the old key): a retried proposal gets its old draft, never a second;
    the old draft is approved, started and followed to COMPLETED. Old ids carry no tenant, so
    globex can start its own case under acme's old ids (to be finished, held at ValidateCase,
    to be escalated): ValidateCase refuses each (no draft of globex holds the id) before any
    effect, and acme's agent is told CONFLICT, never globex's state."""
    client, legacy_table = local_aws.client("dynamodb"), local_aws.outputs["LegacyDraftsTableName"]
    retried = agent_proposal("7200")
    old_id = legacy_drafts.propose(client, legacy_table, "acme", retried)
    ids = {
        kind: legacy_drafts.propose(client, legacy_table, "acme", agent_proposal(ticket))
        for kind, ticket in TICKETS.items()
    }
    for case_id in ids.values():  # approved by the old code, before the upgrade
        approve_as_before(client, legacy_table, case_id)
    acme = server(local_aws, outputs, "acme")

    async def retry(session: ClientSession) -> list[dict[str, Any]]:
        again = await call(session, "propose_replacement", **retried)
        changed = await call(session, "propose_replacement", **{**retried, "amount_minor": 1})
        return [again, changed]

    again, changed = with_session(acme, retry)
    assert (again["case_id"], again["created"], again["status"]) == (
        old_id,
        False,
        "APPROVAL_PENDING",
    )
    assert changed["error"]["code"] == "CONFLICT"
    assert client.scan(TableName=local_aws.outputs["DraftsTableName"])["Count"] == 0
    approve(capsys, outputs, old_id)  # today's sagactl, on the old draft where it is

    async def start_and_follow(session: ClientSession) -> list[dict[str, Any]]:
        started = await call(session, "start_replacement", case_id=old_id)
        return [started, *await follow(session, old_id)]

    started, *polled = with_session(acme, start_and_follow)
    assert started["started"] is True and polled[-1]["status"] == "COMPLETED", polled[-1]
    assert payments_of(local_aws, retried["payment_reference"]) == 1

    arns, answers = run_globex_under(local_aws, ids, monkeypatch, "ValidateCase", acme)
    assert_conflicts_only(answers)
    sfn = local_aws.client("stepfunctions")
    for kind, arn in arns.items():
        described = sfn.describe_execution(executionArn=arn)
        assert (described["status"], described.get("error")) == ("FAILED", "InvalidRequest"), kind
        assert "no draft of tenant globex holds it" in described["cause"], described["cause"]
    for kind, ticket in TICKETS.items():
        assert payments_of(local_aws, agent_proposal(ticket)["payment_reference"]) == 0, kind
        assert payments_of(local_aws, GLOBEX_PAYMENT.format(ticket=ticket)) == 0, kind
    for case_id in ids.values():
        assert count(local_aws, "CasesTableName", case_id) == 0
    assert_conflicts_only(with_session(acme, get_and_start_each(ids)))

    async def globex_looks(session: ClientSession) -> dict[str, Any]:
        return await call(session, "get_replacement", case_id=old_id)

    assert with_session(server(local_aws, outputs, "globex"), globex_looks)["error"]["code"] == (
        "NOT_FOUND"
    )
    # sagactl against a stack deployed before drafts were keyed by tenant: it says what to do.
    before = {k: v for k, v in json.loads(outputs.read_text()).items() if "Legacy" not in k}
    outputs.write_text(json.dumps(before))
    refused = Sagactl(capsys)(
        "case", "approve", "--case", old_id, "--yes", "--outputs", str(outputs)
    )
    assert refused.code != 0 and "predates drafts keyed by tenant" in refused.err, refused.err


def approve_as_before(client: Any, table: str, case_id: str) -> None:
    """supervisor@acme's approval, stored by the code before the upgrade."""
    item = client.get_item(TableName=table, Key={"case_id": {"S": case_id}})["Item"]
    draft = from_item(item)
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    signed = sign_locally(case)["approval"]
    legacy_drafts.approve(client, table, case_id, draft["digest"], signed)


def test_agent_case_ids_of_tenants_never_meet(
    local_aws: LocalAws, outputs: Path, tmp_path: Path
) -> None:
    """acme, acme-eu (whose id extends acme's) and a tenant with a 63-character id propose the
    same request id: three cases, each id naming its tenant, each draft under its tenant in the
    drafts table, each invisible to the others. The two extra tenants get an agent
    configuration as the stack writes one (the server serves a tenant whose parameter the
    outputs name; nothing here is started)."""
    longest = "t" * 63
    stack = json.loads(outputs.read_text())
    parameters = json.loads(stack["AgentConfigParameters"])
    ssm = local_aws.client("ssm")
    acme = json.loads(ssm.get_parameter(Name=parameters["acme"])["Parameter"]["Value"])
    key = json.loads(stack["ApprovalKeys"])["acme"]["supervisor@acme"]
    for tenant in ("acme-eu", longest):
        parameters[tenant] = agent_config_parameter("wider", tenant)
        config = {**acme, "tenant_id": tenant, "approval_keys": {f"ops@{tenant}": {"current": key}}}
        ssm.put_parameter(Name=parameters[tenant], Value=json.dumps(config), Type="String")
    wider = tmp_path / "wider-outputs.json"
    wider.write_text(json.dumps({**stack, "AgentConfigParameters": json.dumps(parameters)}))
    tenants = ("acme", "acme-eu", longest)

    ids: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}

    def propose_then_look(tenant: str) -> Any:
        """Propose, then get every case proposed so far (this tenant's own included)."""

        async def body(session: ClientSession) -> None:
            if tenant not in ids:
                proposed = await call(session, "propose_replacement", **agent_proposal("7300"))
                assert proposed["created"] is True, proposed
                ids[tenant] = str(proposed["case_id"])
            for other, case_id in ids.items():
                answer = await call(session, "get_replacement", case_id=case_id)
                code = answer["error"]["code"] if "error" in answer else answer["status"]
                seen.setdefault(tenant, {})[other] = code

        return body

    for tenant in (*tenants, "acme"):  # acme looks again once the others proposed
        with_session(server(local_aws, wider, tenant), propose_then_look(tenant))
    assert len(set(ids.values())) == 3
    for tenant, case_id in ids.items():
        assert case_id.startswith(f"agt_{tenant}_") and len(case_id) <= 80, case_id
        for other, code in seen[tenant].items():  # its own case, and the others' it looked at
            assert code == ("APPROVAL_PENDING" if other == tenant else "NOT_FOUND"), (tenant, other)
    assert set(seen["acme"]) == set(tenants) and set(seen[longest]) == set(tenants)
    ddb = local_aws.client("dynamodb")
    for tenant, case_id in ids.items():
        own = ddb.query(
            TableName=local_aws.outputs["DraftsTableName"],
            KeyConditionExpression="tenant_id = :t",
            ExpressionAttributeValues={":t": {"S": tenant}},
        )["Items"]
        assert [item["case_id"]["S"] for item in own] == [case_id]
