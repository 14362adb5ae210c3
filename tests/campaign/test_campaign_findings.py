"""Bugs the fault campaign found, each as its minimal reproduction through the real state machine.

A bug in lambdas/saga is not fixed by the campaign's branch: its test is marked xfail(strict), so
it fails loudly once the fix lands (remove the mark and the entry in sagactl/campaign/known.py).
"""

from __future__ import annotations

from typing import Any

import pytest

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


@pytest.mark.xfail(
    strict=True,
    reason="known bug reserve-sandbox-control-untyped (sagactl/campaign/known.py): ReserveStock "
    "lets a DynamoDB error of the sandbox's fault cursor escape untyped",
)
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
