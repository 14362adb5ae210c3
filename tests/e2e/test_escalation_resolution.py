"""A person's resolution ends the automation's part for good: the real stack in the local AWS.

The payment provider refuses every refund before committing it (`fail_before_commit`, one per
delivery, as many as the workflow's retries), so the execution ends FAILED at IssueRefund with
the case still IN_PROGRESS and the refund action open (its lease given back, nothing sent): an
open escalation of the third kind, a stopped execution. A person resolves it. Afterwards a
redrive by the real AWS CLI, a late delivery to the function and a reconciliation all find the
decision in the ledger: nothing is dispatched, nothing is written, no refund is made, and no
error quotes the decision.
"""

from __future__ import annotations

import json
from typing import Any

from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from sagactl.operations.escalations import open_escalations, resolve
from sagactl.target import local_target_from_outputs
from tests.cli.sagactl_helpers import get_item
from tests.e2e.test_local_redrive import redrive
from tests.e2e.test_saga_paths import load_example

CASE_ID = "case-refund-refused-before-commit"
REFUND_KEY = f"acme#refund#{CASE_ID}.refund"
DELIVERIES = 4  # cdk.json retry.tool: the first delivery and MaxAttempts 3 retries


def _case() -> dict[str, Any]:
    case = load_example("happy-path")
    case["case_id"] = CASE_ID
    case["sandbox"]["faults"]["refund"] = ["fail_before_commit"] * DELIVERIES
    return sign_locally(case)


def _ledger(local: LocalAws, key: str) -> dict[str, Any]:
    return get_item(local, "LedgerTableName", {"action_key": {"S": key}})


def _refunds(local: LocalAws) -> int:
    return len(
        local.client("dynamodb").scan(
            TableName=local.outputs["PaymentsTableName"],
            FilterExpression="case_id = :c",
            ExpressionAttributeValues={":c": {"S": CASE_ID}},
            ConsistentRead=True,
        )["Items"]
    )


def _last_delivery(history: list[dict[str, Any]], state: str) -> dict[str, Any]:
    """The Lambda parameters (FunctionName, Payload) of the last delivery to `state`."""
    for event in reversed(history):
        if event["type"] == "TaskScheduled":
            parameters: dict[str, Any] = json.loads(
                event["taskScheduledEventDetails"]["parameters"]
            )
            if parameters["Payload"]["attempt"]["state"] == state:
                return parameters
    raise AssertionError(f"no delivery to {state}")


def _invoke(local: LocalAws, function: str, payload: dict[str, Any]) -> tuple[str | None, Any]:
    response = local.client("lambda").invoke(
        FunctionName=function, Payload=json.dumps(payload).encode()
    )
    return response.get("FunctionError"), json.loads(response["Payload"].read())


def test_after_a_resolution_no_redrive_or_late_delivery_dispatches_the_action(
    local_aws: LocalAws,
) -> None:
    description, history = local_aws.run_case(_case())
    assert (description["status"], description["error"]) == ("FAILED", "TransientError")
    refund_before = _ledger(local_aws, REFUND_KEY)
    assert refund_before["status"]["S"] == "IN_PROGRESS" and "owner" not in refund_before
    assert int(refund_before["attempts"]["N"]) == DELIVERIES
    assert _refunds(local_aws) == 0
    target = local_target_from_outputs(local_aws.outputs)

    [escalation] = open_escalations(target, budget=8)
    assert (escalation.case_id, escalation.outcome, escalation.reason, escalation.step) == (
        CASE_ID,
        "IN_PROGRESS",
        "EXECUTION_FAILED",
        "refund",
    )
    assert escalation.redrive is not None and escalation.redrive["can_help"] is True

    report = resolve(
        target, CASE_ID, decision="refund paid by bank transfer", by="ops@acme", budget=8
    )
    # the open refund, and the ship and release actions that have no record yet
    assert report.settled == [
        REFUND_KEY,
        f"acme#ship#{CASE_ID}.ship",
        f"acme#release#{CASE_ID}.reserve",
    ]
    assert open_escalations(target, budget=8) == []
    settled = _ledger(local_aws, REFUND_KEY)
    assert settled["status"]["S"] == "IN_PROGRESS" and "open_status" not in settled

    # A redrive with the real AWS CLI: Step Functions reruns IssueRefund, the ledger refuses.
    redriven = redrive(local_aws, str(description["executionArn"]))
    assert redriven.returncode == 0, redriven.stderr
    again = local_aws.wait_for_execution(str(description["executionArn"]))
    assert (again["status"], again["error"], again["redriveCount"]) == (
        "FAILED",
        "ActionSettled",
        1,
    )
    assert "resolved by ops@acme" in again["cause"]
    assert "bank transfer" not in again["cause"]  # case data stays out of errors

    # A late delivery of the same task, straight to the function: refused the same way.
    delivery = _last_delivery(history, "IssueRefund")
    error, answer = _invoke(local_aws, delivery["FunctionName"], delivery["Payload"])
    assert error is not None and answer["errorType"] == "ActionSettled"

    # Reconciliation: refused, not RETRY (a lookup would find nothing and allow a re-attempt),
    # and not ESCALATE either: the case is resolved, nobody is left to escalate to.
    reconciler = next(
        f["FunctionName"]
        for f in local_aws.client("lambda").list_functions()["Functions"]
        if f["FunctionName"].endswith("ReconcileActionFunction")
    )
    error, answer = _invoke(local_aws, reconciler, {**delivery["Payload"], "step": "refund"})
    assert error is not None and answer["errorType"] == "ActionSettled"
    assert "settled by ops@acme" in answer["errorMessage"]

    assert _refunds(local_aws) == 0  # no refund was ever made
    assert _ledger(local_aws, REFUND_KEY) == settled  # nothing written after the decision
    assert open_escalations(target, budget=8) == []  # the decision stands
