"""Four eyes on the local AWS (docs/design.md §9): a refund above tenant hooli's threshold needs
the signatures of two distinct approvers, through `sagactl case approve` and through the agent
tools (`sagactl mcp`), and every path that could cause an effect verifies it the same way.

Every refusal is checked where effects land: no execution past ValidateCase, no case record, no
ledger record, stock untouched, no refund, no shipment.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from local_aws.approval_keys import co_sign_locally, sign_locally
from local_aws.aws_calls import recording_aws_calls
from local_aws.environment import LocalAws
from saga.approval_keys import forget_public_keys
from saga.identity import Operation
from tests.cli.sagactl_helpers import Sagactl
from tests.e2e.mcp_agent import call, count, follow, server, with_session
from tests.e2e.test_saga_paths import Saga, load_example
from tests.e2e.test_signed_approvals import rejected_at_validation
from tests.tools_harness import agent_proposal

CONTROLLER, CFO = "controller@hooli", "cfo@hooli"
AMOUNT = 250_000  # 2500.00 USD: above hooli's 1000.00 USD
NEW_CASE = [
    "case",
    "new",
    "--tenant",
    "hooli",
    "--order-id",
    "ord-500",
    "--customer-id",
    "cus-7",
    "--sku",
    "SKU-RED-MUG",
    "--quantity",
    "1",
    "--payment-reference",
    "pay-500",
    "--amount-minor",
    str(AMOUNT),
    "--currency",
    "USD",
    "--address-name",
    "Ada Li",
    "--address-line1",
    "1 Main St",
    "--address-city",
    "Springfield",
    "--address-postal-code",
    "12345",
    "--address-country",
    "US",
    "--approved-by",
    CONTROLLER,
]


@pytest.fixture
def outputs(local_aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "outputs.json"
    local_aws.write_outputs(path)
    monkeypatch.setenv("SAGA_LOCAL_OUTPUTS", str(path))
    return path


def hooli_case(case_id: str) -> dict[str, Any]:
    """The happy path's case for tenant hooli, 2500.00 USD, signed by the controller alone."""
    case = load_example("happy-path")
    case.pop("sandbox")
    case.update(case_id=case_id, tenant_id="hooli")
    case["refund"]["amount_minor"] = AMOUNT
    case["approval"] = {"revision": 1, "approved_by": CONTROLLER}
    return sign_locally(case)


def record(local: LocalAws, case_id: str) -> dict[str, Any] | None:
    item: dict[str, Any] = local.client("dynamodb").get_item(
        TableName=local.outputs["CasesTableName"], Key={"case_id": {"S": case_id}}
    )
    return item.get("Item")


def test_two_approvers_sign_a_case_file_with_sagactl_and_it_completes_once(
    local_aws: LocalAws, outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sagactl = Sagactl(capsys)
    case_file = tmp_path / "case-four-eyes-cli.json"
    assert sagactl(*NEW_CASE, "--case-id", "case-four-eyes-cli", "-o", str(case_file)).code == 0

    first = sagactl("case", "approve", str(case_file))
    assert first.code == 0, first.err
    assert (
        "  approvals 2 from distinct approvers (tenant hooli's threshold for USD is 100000 minor "
        "units (1000.00 USD))"
    ) in first.out
    assert "  with you  1 of 2 approvals: one more approver of the tenant must sign" in first.out
    assert first.out.rstrip().endswith(
        f"1 of 2 approvals: one more approver of the tenant must sign: sagactl case approve "
        f"{case_file} --as APPROVER"
    )
    # One signature: sagactl start refuses before anything starts ...
    early = sagactl("start", str(case_file))
    assert early.code == 2
    assert "1 of 2 approvals from distinct approvers of tenant hooli" in early.err
    # ... and so does the controller signing again: their signature is replaced, not added.
    again = sagactl("case", "approve", str(case_file), "--json")
    assert again.json()["approvals"] == {"given": 1, "required": 2}
    assert "co_signatures" not in json.loads(case_file.read_text())["approval"]

    second = sagactl("case", "approve", str(case_file), "--as", CFO)
    assert second.code == 0, second.err
    assert "  signed    by controller@hooli at " in second.out
    assert second.out.rstrip().endswith("2 of 2 approvals: it can start")
    approval = json.loads(case_file.read_text())["approval"]
    assert approval["approved_by"] == CONTROLLER
    assert [co["approved_by"] for co in approval["co_signatures"]] == [CFO]

    started = sagactl("start", str(case_file), "--watch", "--timeout", "120")
    assert started.code == 0, started.out + started.err
    assert "outcome: COMPLETED" in started.out
    # The timeline names both approvers ValidateCase accepted the case on.
    assert re.search(
        r"ok case valid, approved by controller@hooli \(signed \S+\) and cfo@hooli \(signed \S+\)",
        started.out,
    ), started.out
    repeated = sagactl("start", str(case_file))
    assert repeated.code == 0, repeated.err
    assert count(local_aws, "PaymentsTableName", "case-four-eyes-cli") == 1
    assert count(local_aws, "ShipmentsTableName", "case-four-eyes-cli") == 1
    stored = record(local_aws, "case-four-eyes-cli")
    assert stored is not None and stored["approvals_required"] == {"N": "2"}


@pytest.mark.parametrize(
    ("signed", "why"),
    [
        pytest.param(lambda case: case, "1 of 2 approvals", id="one approver"),
        pytest.param(
            lambda case: co_sign_locally(case, approved_by=CONTROLLER),
            "1 of 2 approvals",
            id="one approver twice",
        ),
        pytest.param(
            lambda case: forge(co_sign_locally(case, approved_by=CFO)),
            "the signature of 'cfo@hooli' does not verify over this case",
            id="forged co-signature",
        ),
    ],
)
def test_above_the_threshold_too_few_approvers_change_nothing(
    local_aws: LocalAws, signed: Any, why: str
) -> None:
    error, cause = rejected_at_validation(local_aws, signed(hooli_case("case-too-few")))
    assert error == "ApprovalInvalid"
    assert why in cause


def forge(case: dict[str, Any]) -> dict[str, Any]:
    """The co-signature's time changed after signing (a later approval claimed)."""
    case["approval"]["co_signatures"][0]["signed_at"] = "2027-01-01T00:00:00Z"
    return case


def test_a_tool_invoked_directly_counts_the_approvers_its_case_record_requires(
    local_aws: LocalAws,
) -> None:
    """A case accepted with two approvers stops FAILED at its refund (the provider keeps
    failing), IN_PROGRESS; a direct invoke of IssueRefund with the same parameters and only the
    controller's signature is refused on the count its case record holds, before the ledger."""
    both = co_sign_locally(hooli_case("case-direct-four"), approved_by=CFO)
    both["sandbox"] = {"faults": {"refund": ["fail_before_commit"] * 8}}
    stopped = Saga(local_aws, both)
    assert stopped.status == "FAILED" and stopped.case_outcome() == "IN_PROGRESS"
    ledger_before = stopped.ledger(Operation.REFUND)
    functions = local_aws.provisioned.functions if local_aws.provisioned else {}
    (refund,) = [n for lid, n in functions.items() if lid.startswith("ToolsIssueRefund")]
    payload = {
        "case": hooli_case("case-direct-four"),  # the controller's signature alone
        "attempt": {"execution": "arn:direct", "state": "IssueRefund", "retry": 0},
    }
    response = local_aws.client("lambda").invoke(
        FunctionName=refund, Payload=json.dumps(payload).encode()
    )
    body = json.loads(response["Payload"].read())
    assert body["errorType"] == "ApprovalInvalid", body
    assert "1 of 2 approvals" in body["errorMessage"]
    assert stopped.ledger(Operation.REFUND) == ledger_before
    assert stopped.count_effects("PaymentsTableName") == 0


def test_each_approvers_key_is_read_once_per_function_and_never_when_warm(
    local_aws: LocalAws,
    handlers_in_this_process: None,  # the key cache forgotten here is the one the handlers use
) -> None:
    forget_public_keys()
    with recording_aws_calls() as cold_calls:
        first = Saga(local_aws, co_sign_locally(hooli_case("case-kms-4-cold"), approved_by=CFO))
    with recording_aws_calls() as warm_calls:
        second = Saga(local_aws, co_sign_locally(hooli_case("case-kms-4-warm"), approved_by=CFO))

    assert (first.output["outcome"], second.output["outcome"]) == ("COMPLETED", "COMPLETED")
    cold = Counter(
        (call.function_name, call.operation) for call in cold_calls if call.service == "kms"
    )
    # ValidateCase, ReserveStock, IssueRefund, CreateShipment (the happy path's four functions,
    # the shipment's transaction records the outcome): two keys each.
    assert len(cold) == 4 and set(cold.values()) == {2}, cold
    assert [call for call in warm_calls if call.service == "kms"] == []


# --- through the agent tools ----------------------------------------------------------------
ABOVE = {**agent_proposal("9500"), "amount_minor": AMOUNT}


def test_an_agents_case_above_the_threshold_starts_only_with_two_approvers(
    local_aws: LocalAws, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sagactl = Sagactl(capsys)
    params = server(local_aws, outputs, tenant="hooli")

    async def propose(session: ClientSession) -> dict[str, Any]:
        return await call(session, "propose_replacement", **ABOVE)

    proposed = with_session(params, propose)
    case_id = proposed["case_id"]
    assert proposed["approvals"] == "0 of 2 approvals"
    approve = ("case", "approve", "--case", case_id, "--yes", "--outputs", str(outputs))

    no_one = sagactl(*approve)  # two approvers: which one signs must be said
    assert no_one.code == 2 and "--as APPROVER" in no_one.err
    first = sagactl(*approve, "--as", CONTROLLER)
    assert first.code == 0, first.err
    assert (
        f"1 of 2 approvals: one more approver of the tenant must sign: sagactl case approve "
        f"--case {case_id} --as APPROVER"
    ) in first.out
    twice = sagactl(*approve, "--as", CONTROLLER)
    assert twice.code != 0 and "controller@hooli approved it already (1 of 2 approvals)" in (
        twice.err
    )

    async def get_and_start(session: ClientSession) -> list[dict[str, Any]]:
        pending = await call(session, "get_replacement", case_id=case_id)
        return [pending, await call(session, "start_replacement", case_id=case_id)]

    pending, early = with_session(params, get_and_start)
    assert (pending["status"], pending["approvals"]) == ("APPROVAL_PENDING", "1 of 2 approvals")
    assert early["error"]["code"] == "NOT_APPROVED"
    assert "1 of 2 approvals" in early["error"]["message"]
    executions = local_aws.client("stepfunctions").list_executions(
        stateMachineArn=local_aws.state_machine_arn
    )["executions"]
    assert executions == []

    second = sagactl(*approve, "--as", CFO)
    assert second.code == 0, second.err
    assert "the agent can start it now (start_replacement) (2 of 2 approvals)" in second.out

    async def start_and_follow(session: ClientSession) -> list[dict[str, Any]]:
        started = await call(session, "start_replacement", case_id=case_id)
        repeat = await call(session, "start_replacement", case_id=case_id)
        return [started, repeat, *await follow(session, case_id)]

    started, repeat, *polled = with_session(params, start_and_follow)
    assert (started["started"], repeat["started"]) == (True, False)
    assert polled[-1]["status"] == "COMPLETED", polled[-1]
    assert count(local_aws, "PaymentsTableName", case_id) == 1
    assert count(local_aws, "ShipmentsTableName", case_id) == 1


def test_an_agents_case_with_a_forged_co_signature_starts_nothing(
    local_aws: LocalAws, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The controller approves, then a co-signature in the CFO's name made with the controller's
    key is written straight into the drafts table (what an approver's role could write)."""
    params = server(local_aws, outputs, tenant="hooli")

    async def propose(session: ClientSession) -> dict[str, Any]:
        return await call(session, "propose_replacement", **{**ABOVE, "request_id": "t-forged"})

    case_id = with_session(params, propose)["case_id"]
    approved = Sagactl(capsys)(
        "case", "approve", "--case", case_id, "--yes", "--as", CONTROLLER, "--outputs", str(outputs)
    )
    assert approved.code == 0, approved.err
    ddb = local_aws.client("dynamodb")
    key = {"tenant_id": {"S": "hooli"}, "case_id": {"S": case_id}}
    table = local_aws.outputs["DraftsTableName"]
    draft = ddb.get_item(TableName=table, Key=key)["Item"]
    case = {
        "case_id": case_id,
        "tenant_id": "hooli",
        "approval": {"revision": 1, "digest": draft["digest"]["S"]},
    }
    forged = co_sign_locally(case, approved_by=CFO, signer=("hooli", CONTROLLER))
    co = forged["approval"]["co_signatures"][0]
    ddb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET approval.co_signatures = :c",
        ExpressionAttributeValues={":c": {"L": [{"M": {k: {"S": v} for k, v in co.items()}}]}},
    )

    async def start(session: ClientSession) -> dict[str, Any]:
        return await call(session, "start_replacement", case_id=case_id)

    refused = with_session(params, start)
    assert refused["error"]["code"] == "NOT_APPROVED", refused
    assert (
        "is a key of 'controller@hooli' of tenant 'hooli', not a key of 'cfo@hooli'"
        in (refused["error"]["message"])
    )
    executions = local_aws.client("stepfunctions").list_executions(
        stateMachineArn=local_aws.state_machine_arn
    )["executions"]
    assert executions == []
    assert record(local_aws, case_id) is None
    assert count(local_aws, "PaymentsTableName", case_id) == 0
