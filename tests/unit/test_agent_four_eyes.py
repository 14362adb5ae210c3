"""Four eyes through the agent tools (saga.agent.tools) on moto: a draft above its tenant's
threshold takes one signature per approver, `get_replacement` says "1 of 2 approvals", and
`start_replacement` starts nothing until two distinct approvers' signatures verify (the same
saga.acceptance.accept_new_case as ValidateCase)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from local_aws.approval_keys import co_sign_locally, sign_locally
from saga.agent.drafts import DraftConflict, draft_case
from saga.agent.tools import AgentTools, ErrorCode, ToolError
from saga.approval_keys import KmsPublicKeys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from tests.tools_harness import APPROVAL_KEYS_JSON, THRESHOLDS, agent_proposal

CONTROLLER, CFO = "controller@hooli", "cfo@hooli"
ABOVE = {**agent_proposal("9001"), "amount_minor": 250_000}  # 2500.00 USD: above 1000.00


@pytest.fixture
def hooli(tools: AgentTools) -> AgentTools:
    """The tools for tenant hooli, with the thresholds the stack gives them."""
    verifier = ApprovalVerifier(
        parse_trusted_keys(APPROVAL_KEYS_JSON),
        KmsPublicKeys(lambda: boto3.client("kms")),
        thresholds=THRESHOLDS,
    )
    return AgentTools(**{**tools.__dict__, "tenant_id": "hooli", "approvals": verifier})


def first_signature(tools: AgentTools, case_id: str, approver: str = CONTROLLER) -> None:
    """What `sagactl case approve --case` stores for the first approver."""
    draft = tools.drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = approver
    tools.drafts.approve(case_id, digest=draft["digest"], approval=sign_locally(case)["approval"])


def co_signature(tools: AgentTools, case_id: str, approver: str, **signing: Any) -> None:
    """What `sagactl case approve --case --as` stores for a second approver."""
    draft = tools.drafts.get(case_id)
    assert draft is not None
    signed = co_sign_locally(draft_case(draft), approved_by=approver, **signing)
    tools.drafts.co_sign(
        case_id, digest=draft["digest"], signature=signed["approval"]["co_signatures"][-1]
    )


def executions(tools: AgentTools) -> list[Any]:
    return list(
        tools.stepfunctions.list_executions(stateMachineArn=tools.state_machine_arn)["executions"]
    )


def not_started(tools: AgentTools, case_id: str) -> ToolError:
    with pytest.raises(ToolError) as caught:
        tools.call("start_replacement", {"case_id": case_id})
    assert caught.value.code is ErrorCode.NOT_APPROVED
    assert executions(tools) == []
    assert tools.cases.get(case_id) is None
    return caught.value


def test_above_the_threshold_a_draft_starts_only_with_two_approvers(hooli: AgentTools) -> None:
    proposed = hooli.call("propose_replacement", ABOVE)
    case_id = proposed["case_id"]
    assert (proposed["status"], proposed["approvals"]) == ("APPROVAL_PENDING", "0 of 2 approvals")

    first_signature(hooli, case_id)
    pending = hooli.call("get_replacement", {"case_id": case_id})
    assert (pending["status"], pending["approvals"]) == ("APPROVAL_PENDING", "1 of 2 approvals")
    assert "1 of 2 approvals: another approver of the tenant approves it" in pending["next"]
    assert "1 of 2 approvals" in not_started(hooli, case_id).message

    # The same approver again: the draft takes one signature per approver.
    with pytest.raises(DraftConflict, match="approved already by controller@hooli"):
        co_signature(hooli, case_id, CONTROLLER)
    assert hooli.call("get_replacement", {"case_id": case_id})["approvals"] == "1 of 2 approvals"

    co_signature(hooli, case_id, CFO)
    approved = hooli.call("get_replacement", {"case_id": case_id})
    assert (approved["status"], approved["approvals"]) == ("APPROVED", "2 of 2 approvals")
    started = hooli.call("start_replacement", {"case_id": case_id})
    again = hooli.call("start_replacement", {"case_id": case_id})
    assert (started["started"], again["started"]) == (True, False)
    assert len(executions(hooli)) == 1
    # A third signature is one too many: the draft is closed to more.
    with pytest.raises(DraftConflict, match="approved already by controller@hooli and cfo@hooli"):
        co_signature(hooli, case_id, "someone@hooli")


def test_a_forged_co_signature_starts_nothing(hooli: AgentTools) -> None:
    """The controller signs in the CFO's name with their own key: the store takes what an
    approver writes, the start verifies it."""
    case_id = hooli.call("propose_replacement", ABOVE)["case_id"]
    first_signature(hooli, case_id)
    co_signature(hooli, case_id, CFO, signer=("hooli", CONTROLLER))

    assert hooli.call("get_replacement", {"case_id": case_id})["status"] == "APPROVED"
    refused = not_started(hooli, case_id)
    assert "is a key of 'controller@hooli' of tenant 'hooli', not a key of 'cfo@hooli'" in (
        refused.message
    )


def test_below_the_threshold_one_approver_starts_it_and_nothing_says_approvals(
    hooli: AgentTools,
) -> None:
    case_id = hooli.call("propose_replacement", agent_proposal("9002"))["case_id"]  # 20.00 USD
    first_signature(hooli, case_id, CFO)
    approved = hooli.call("get_replacement", {"case_id": case_id})
    assert approved["status"] == "APPROVED" and "approvals" not in approved
    assert hooli.call("start_replacement", {"case_id": case_id})["started"] is True


def test_another_currency_of_a_tenant_with_thresholds_needs_two(hooli: AgentTools) -> None:
    proposal = {**agent_proposal("9003"), "currency": "EUR", "amount_minor": 100}
    case_id = hooli.call("propose_replacement", proposal)["case_id"]
    first_signature(hooli, case_id)
    assert hooli.call("get_replacement", {"case_id": case_id})["approvals"] == "1 of 2 approvals"
    not_started(hooli, case_id)
