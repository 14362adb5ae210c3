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
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import ClientSession

from saga.approvals import signed_message
from saga.identity import sha256_hex
from sagactl.local.approval_keys import local_key_arn, local_private_key
from sagactl.local.environment import LocalAws
from tests.cli.sagactl_helpers import Sagactl
from tests.e2e.held_functions import function_held
from tests.e2e.mcp_agent import call, count, server, with_session
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
    local: LocalAws, ids: dict[str, str], monkeypatch: pytest.MonkeyPatch, hold: str, ask: Any
) -> tuple[dict[str, str], Any]:
    """Globex's cases under `ids`: the completed and escalated ones run to their end, the
    running one is held at `hold` while `ask()` runs; (execution ARNs, what `ask` returned)."""
    arns: dict[str, str] = {}
    for kind in ("completed", "escalated"):
        arns[kind] = local.start_case(globex_case(ids[kind], TICKETS[kind], kind))
        local.wait_for_execution(arns[kind])
    with function_held(monkeypatch, hold) as waiting:
        arns["running"] = local.start_case(
            globex_case(ids["running"], TICKETS["running"], "running")
        )
        assert waiting.wait(timeout=60), f"globex's case never reached {hold}"
        asked = ask()
    local.wait_for_execution(arns["running"])
    return arns, asked


def assert_conflicts_only(answers: dict[str, dict[str, Any]]) -> None:
    """Every answer is a CONFLICT that says what to do and tells nothing of globex's case."""
    for asked, answer in answers.items():
        assert answer.get("error", {}).get("code") == "CONFLICT", (asked, answer)
        message = answer["error"]["message"]
        assert "new request_id" in message, (asked, message)
        for secret in ("globex", "gx-", "pay-globex", "999", "EUR", "IssueRefund"):
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

    arns, answers = run_globex_under(
        local_aws,
        ids,
        monkeypatch,
        "ValidateCase",
        lambda: with_session(acme, get_and_start_each(ids)),
    )

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
    # After globex's executions ended, acme's agent is still told the conflict.
    assert_conflicts_only(with_session(acme, get_and_start_each(ids)))
