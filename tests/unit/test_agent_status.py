"""`get_replacement` reports COMPLETED only for a case recorded COMPLETED (docs/design.md §10),
tested at the rule's edge (issue 24, item 5): an execution that SUCCEEDED tells nothing by
itself (a case record still IN_PROGRESS or COMPENSATION_PENDING is no completed case), and the
record alone, once Step Functions forgot the execution, decides the same way. The mutants
`replacement-completed-closed` and `replacement-completed-recorded` (sagactl/campaign/mutants.py)
relax each answer by one outcome; these tests kill them."""

from __future__ import annotations

from typing import Any

import pytest

from saga.agent.status import closed_status, recorded_status

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
