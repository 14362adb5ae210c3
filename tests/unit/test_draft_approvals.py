"""Storing an approval on a draft (saga.agent.drafts.DraftStore) without an ungoverned read: the
approver's UpdateItem asks for nothing back when its condition fails, the draft is re-read with
the GetItem the approver role is granted, strongly consistent, and whether the write was the
approver's own (the SDK repeating a write whose answer was lost) is decided from what is
written once: the approval as signed, the co-signatures."""

from __future__ import annotations

from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from saga.agent.drafts import DraftConflict, draft_case
from saga.agent.tools import AgentTools
from tests.tools_harness import agent_proposal

SECOND = {"approved_by": "cfo@acme", "signature": "c2Vjb25k", "signed_at": "2026-12-01T10:00:00Z"}


def _proposed_and_signed(tools: AgentTools) -> tuple[str, str, dict[str, Any]]:
    case_id = tools.call("propose_replacement", agent_proposal("5150"))["case_id"]
    draft = tools.drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = "supervisor@acme"
    return case_id, str(draft["digest"]), dict(sign_locally(case)["approval"])


def _recorded(tools: AgentTools) -> list[tuple[str, dict[str, Any]]]:
    """The DynamoDB calls the store makes from now on, with their parameters."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.name, dict(params)))

    tools.drafts.client.meta.events.register("provide-client-params.dynamodb.*", record)
    return calls


def test_a_failed_condition_is_answered_by_a_consistent_get_not_by_the_update(
    tools: AgentTools,
) -> None:
    """IAM's condition keys for DynamoDB (LeadingKeys, Select, Attributes, ReturnValues,
    ReturnConsumedCapacity: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html)
    govern no `ReturnValuesOnConditionCheckFailure`: the UpdateItem never sends it."""
    case_id, digest, approval = _proposed_and_signed(tools)
    tools.drafts.approve(case_id, digest=digest, approval=approval)
    calls = _recorded(tools)

    tools.drafts.approve(case_id, digest=digest, approval=approval)  # its condition fails: ours

    assert [name for name, _ in calls] == ["UpdateItem", "GetItem"]
    update, get = calls[0][1], calls[1][1]
    assert "ReturnValuesOnConditionCheckFailure" not in update
    assert update.get("ReturnValues", "NONE") == "NONE"
    assert get["ConsistentRead"] is True
    assert get["Key"] == update["Key"]


def test_an_approval_repeated_after_a_co_signature_is_still_the_approvers_own(
    tools: AgentTools,
) -> None:
    """The approval is written once; a co-signature added to it since does not make the
    approver's own approval, repeated by the SDK after its answer was lost, someone else's."""
    case_id, digest, approval = _proposed_and_signed(tools)
    tools.drafts.approve(case_id, digest=digest, approval=approval)
    tools.drafts.co_sign(case_id, digest=digest, signature=SECOND)

    tools.drafts.approve(case_id, digest=digest, approval=approval)  # the repeat: no conflict
    tools.drafts.co_sign(case_id, digest=digest, signature=SECOND)  # its repeat too

    stored = tools.drafts.get(case_id)
    assert stored is not None
    assert stored["approval"]["co_signatures"] == [SECOND]
    assert {k: v for k, v in stored["approval"].items() if k != "co_signatures"} == approval


def test_another_approval_or_signature_is_a_conflict_naming_who_signed(tools: AgentTools) -> None:
    case_id, digest, approval = _proposed_and_signed(tools)
    tools.drafts.approve(case_id, digest=digest, approval=approval)
    tools.drafts.co_sign(case_id, digest=digest, signature=SECOND)

    other = {**approval, "signed_at": "2026-12-02T00:00:00Z"}
    with pytest.raises(DraftConflict, match="approved already by supervisor@acme and cfo@acme"):
        tools.drafts.approve(case_id, digest=digest, approval=other)
    with pytest.raises(DraftConflict, match="approved already by supervisor@acme and cfo@acme"):
        tools.drafts.co_sign(case_id, digest=digest, signature={**SECOND, "signature": "b3RoZXI="})
    with pytest.raises(DraftConflict, match="there is no such draft") as caught:
        tools.drafts.approve(
            case_id.replace(case_id[-4:], "zzzz"), digest=digest, approval=approval
        )
    assert caught.value.current is None
