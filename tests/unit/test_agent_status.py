"""`get_replacement` reports COMPLETED only for a case recorded COMPLETED (docs/design.md §10),
tested at the rule's edge (issue 24, item 5): an execution that SUCCEEDED tells nothing by
itself (a case record still IN_PROGRESS or COMPENSATION_PENDING is no completed case), and the
record alone, once Step Functions forgot the execution, decides the same way. The mutants
`replacement-completed-closed` and `replacement-completed-recorded` (fault_campaign/mutants.py)
relax each answer by one outcome; these tests kill them."""

from __future__ import annotations

from typing import Any

import pytest

from saga.agent.owned import DraftRecords, draft_execution_name, started_input
from saga.agent.status import closed_status, recorded_status
from saga.agent.tools import AgentTools
from tests.unit.test_agent_tools import PROPOSAL, approve, record_case

ARN = "arn:aws:states:us-east-1:123456789012:execution:sm:agt_acme_x"


def _record(outcome: str | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    return {"case_id": "agt_acme_x", "outcome": outcome, "execution_arn": ARN}


def _succeeded() -> dict[str, Any]:
    return {"status": "SUCCEEDED", "executionArn": ARN}


def test_a_succeeded_execution_of_a_case_recorded_completed_is_completed() -> None:
    assert closed_status(_succeeded(), _record("COMPLETED"))["status"] == "COMPLETED"


@pytest.mark.parametrize("outcome", ["IN_PROGRESS", "COMPENSATION_PENDING", None])
def test_a_succeeded_execution_is_not_completed_unless_its_case_record_says_so(
    outcome: str | None,
) -> None:
    answer = closed_status(_succeeded(), _record(outcome))
    assert answer["status"] != "COMPLETED"
    assert answer["next"] != "nothing: done"


def test_a_case_record_completed_is_completed_once_its_execution_is_forgotten() -> None:
    assert recorded_status(_record("COMPLETED") or {})["status"] == "COMPLETED"


@pytest.mark.parametrize("outcome", ["IN_PROGRESS", "COMPENSATION_PENDING"])
def test_a_case_record_not_completed_is_not_completed_once_its_execution_is_forgotten(
    outcome: str,
) -> None:
    answer = recorded_status(_record(outcome) or {})
    assert answer["status"] == "FAILED"
    assert "a person decides" in answer["next"]


@pytest.mark.parametrize("status", ["FAILED", "TIMED_OUT", "ABORTED"])
@pytest.mark.parametrize("outcome", ["IN_PROGRESS", "COMPENSATION_PENDING"])
def test_a_stopped_case_with_unfinished_work_is_left_to_a_person_never_rejected(
    tools: AgentTools, monkeypatch: pytest.MonkeyPatch, status: str, outcome: str
) -> None:
    """Issue 41, item 4: an execution that stopped while its case record is open (in progress,
    or a compensation pending) may have made effects. get_replacement tells the agent that a
    person redrives it, never "rejected before any effect": an agent told that would propose
    the case again and risk a second effect."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id)
    draft = tools.drafts.get(case_id)
    assert draft is not None
    arn = record_case(tools, case_id, draft_execution_name(draft), outcome=outcome)
    stopped = {
        "executionArn": arn,
        "status": status,
        "error": "TransientError" if status == "FAILED" else None,
        "input": started_input(draft),
    }
    # Step Functions as it describes the draft's own execution (`tools.records` is built anew
    # on each use: the class is what a test replaces).
    monkeypatch.setattr(DraftRecords, "describe", lambda _self, _arn: stopped)

    answer = tools.call("get_replacement", {"case_id": case_id})

    status_fields = ("status", "execution_arn", "error", "redrive_pending", "next")
    assert {name: answer.get(name) for name in status_fields} == {
        "status": "FAILED",
        "execution_arn": arn,
        "error": stopped["error"],
        "redrive_pending": True,
        "next": "a person redrives it (sagactl redrive); do not propose it again",
    }


def test_a_case_rejected_at_validation_is_rejected_before_any_effect(
    tools: AgentTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the rule: no case record (ValidateCase refused the case), so nothing
    was done."""
    case_id = tools.call("propose_replacement", PROPOSAL)["case_id"]
    approve(tools, case_id)
    draft = tools.drafts.get(case_id)
    assert draft is not None
    arn = tools.records.execution_arn(draft)
    rejected = {
        "executionArn": arn,
        "status": "FAILED",
        "error": "ApprovalInvalid",
        "input": started_input(draft),
    }
    monkeypatch.setattr(DraftRecords, "describe", lambda _self, _arn: rejected)

    answer = tools.call("get_replacement", {"case_id": case_id})

    assert (answer["status"], answer["redrive_pending"]) == ("FAILED", False)
    assert answer["next"] == "it was rejected before any effect; nothing was done"


def test_a_case_the_daily_ceiling_refused_says_so_with_the_numbers() -> None:
    """get_replacement on a REFUND_LIMIT_REACHED escalation (docs/design.md §3.12): the reason
    and the numbers the case record keeps, in minor units; another reason has no `limit`."""
    limit = {"ceiling": 3000, "used": 2000, "asked": 2000, "currency": "USD", "day": "2026-12-08"}
    escalation = {
        "reason": "REFUND_LIMIT_REACHED",
        "step": "refund",
        "detail": "refund of 20.00 USD (2000 minor units) refused: ...",
        "limit": limit,
        "decision_needed": "Nothing was refunded: ...",
    }
    record = {**(_record("ESCALATED") or {}), "escalation": escalation}
    for answer in (closed_status(_succeeded(), record), recorded_status(record)):
        assert answer["status"] == "ESCALATED"
        assert answer["reason"] == "REFUND_LIMIT_REACHED"
        assert answer["limit"] == limit
    rejected = {**record, "escalation": {**escalation, "reason": "REFUND_REJECTED"}}
    assert "limit" not in closed_status(_succeeded(), rejected)
