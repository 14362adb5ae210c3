"""Bugs the fault campaign found, each as its minimal reproduction through the real state machine.

Each test failed before its fix. A bug found but not yet fixed would be listed in
sagactl/campaign/known.py with its test marked xfail(strict); none is today.
"""

from __future__ import annotations

from typing import Any

from sagactl.campaign.approval import approve
from sagactl.campaign.observe import Observer
from sagactl.campaign.plan import CasePlan
from sagactl.campaign.runner import CaseRunner
from sagactl.local.environment import LocalAws
from tests.e2e.test_saga_paths import load_example


def _case(case_id: str, faults: dict[str, list[str]]) -> dict[str, Any]:
    raw = load_example("happy-path")
    raw["case_id"] = case_id
    raw.pop("sandbox", None)
    raw["approval"] = {k: v for k, v in raw["approval"].items() if k != "digest"}
    case = approve(raw)
    case["sandbox"] = {"faults": faults}
    return case


def test_a_conflict_on_the_sandbox_fault_cursor_is_retried_like_any_transient_error(
    local_aws: LocalAws,
) -> None:
    """Campaign seed 2, case 39, shrunk: the reserve delivery's read of its fault cursor (an
    UpdateItem on the sandbox table) meets a TransactionConflict. Nothing was sent: the step
    must be retried (TransientError), not fail the execution with botocore's error type."""
    plan = CasePlan(
        seed=2,
        index=39,
        case=_case("case-cursor-conflict", {"reserve": ["fail_before_commit"]}),
        nemeses=[
            {
                "kind": "dynamodb",
                "table": "sandbox",
                "operation": "UpdateItem",
                "error": "conflict",
                "match": "case",
                "skip": 1,
                "count": 1,
            }
        ],
    )
    run = CaseRunner(Observer(local_aws)).run(plan)

    assert run.fired == ["dynamodb:conflict:sandbox:UpdateItem"]
    first = run.snapshots[0].executions[run.owner_arn or ""]
    assert first["task_errors"][0] == "TransientError"  # the sandbox's own fault, retried
    assert (first["status"], first["error"]) == ("SUCCEEDED", None), first["task_errors"]
    assert (first["output"] or {}).get("outcome") == "COMPLETED"
