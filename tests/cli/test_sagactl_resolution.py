"""A person's decision is final (docs/design.md §3.10), end to end through the state machine in
the local AWS: after `sagactl escalations resolve`, neither `sagactl redrive` nor a plain
`aws stepfunctions redrive-execution` nor a late delivery that passed its gate before the
decision makes an effect; the plain redrive ends FAILED with ActionSettled and puts nothing on
the escalation queue; `status` says what `redrive` says.

Two stopped cases: one stopped before any effect (ReserveStock's attempts all fail before its
transaction: no ledger record at all), one stopped after the refund (CreateShipment's attempts
all fail before the carrier commits).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import saga.handlers.reserve_stock as reserve_module
from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from local_aws.lambda_runtime import handlers_in_process
from saga.acceptance import Accepted, accept_forward
from sagactl.operations.escalations import resolve
from sagactl.target import local_target_from_outputs
from tests.cli.sagactl_helpers import Sagactl, get_item, saga, sagactl, scan
from tests.e2e.test_local_redrive import redrive
from tests.e2e.test_saga_paths import load_example

__all__ = ["saga", "sagactl"]

DELIVERIES = 4  # cdk.json retry.tool: the first delivery and MaxAttempts 3 retries
DECISION = "replacement sent by hand from the store, ticket 4711"
SKU = "SKU-RED-MUG"


def _case(case_id: str, **faults: list[str]) -> dict[str, Any]:
    case = load_example("happy-path")
    case["case_id"] = case_id
    case["sandbox"] = {"faults": faults}
    return sign_locally(case)


def _effects(local: LocalAws, case_id: str) -> dict[str, Any]:
    def count(output: str) -> int:
        return sum(1 for item in scan(local, output) if item.get("case_id", {}).get("S") == case_id)

    stock = next(
        int(i["available"]["N"]) for i in scan(local, "InventoryTableName") if i["sku"]["S"] == SKU
    )
    return {
        "reservations": count("ReservationsTableName"),
        "refunds": count("PaymentsTableName"),
        "shipments": count("ShipmentsTableName"),
        "stock": stock,
    }


def _queue(local: LocalAws) -> list[dict[str, Any]]:
    """The escalation queue's messages, read without consuming them for good."""
    sqs = local.client("sqs")
    url = local.outputs["EscalationQueueUrl"]
    found = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in batch:
            found.append(json.loads(message["Body"]))
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        if len(found) > 50:
            break
    return found


def _stopped(local: LocalAws, case: dict[str, Any]) -> str:
    description, _ = local.run_case(case)
    assert (description["status"], description["error"]) == ("FAILED", "TransientError")
    return str(description["executionArn"])


@pytest.mark.parametrize(
    ("case_id", "faults", "before"),
    [
        (
            "case-stopped-before-any-effect",
            {"reserve": ["fail_before_commit"] * DELIVERIES},
            {"reservations": 0, "refunds": 0, "shipments": 0},
        ),
        (
            "case-stopped-after-the-refund",
            {"shipment": ["fail_before_commit"] * DELIVERIES},
            {"reservations": 1, "refunds": 1, "shipments": 0},
        ),
    ],
)
def test_after_a_resolution_no_redrive_makes_an_effect_or_a_message(
    saga: LocalAws,
    sagactl: Sagactl,
    case_id: str,
    faults: dict[str, list[str]],
    before: dict[str, int],
) -> None:
    case = _case(case_id, **faults)
    arn = _stopped(saga, case)
    effects = _effects(saga, case_id)
    assert {k: v for k, v in effects.items() if k != "stock"} == before
    assert (
        sagactl("status", case_id)
        .out.rstrip()
        .endswith(f"(the saga did not finish: `sagactl redrive {case_id}` reruns it)")
    )

    resolved = sagactl(
        "escalations", "resolve", case_id, "--decision", DECISION, "--by", "ops@acme", "--json"
    )
    assert resolved.code == 0, resolved.err
    at = resolved.json()["resolution"]["at"]
    record = get_item(saga, "CasesTableName", {"case_id": {"S": case_id}})
    assert [m for m in _queue(saga) if m.get("case_id") == case_id] == []

    # sagactl refuses, naming who and when, never the decision's text.
    refused = sagactl("redrive", case_id, "--yes", "--json")
    assert refused.code == 3, refused.out
    message = refused.json()["error"]["message"]
    assert f"case {case_id} was resolved by ops@acme at {at}" in message
    assert "ticket 4711" not in message
    status = sagactl("status", case_id)
    assert f"(resolved by ops@acme at {at}: a person's decision is final;" in status.out
    assert "reruns it" not in status.out

    # Step Functions itself redrives; the case's gate and the ledger refuse: nothing happens.
    redriven = redrive(saga, arn)
    assert redriven.returncode == 0, redriven.stderr
    again = saga.wait_for_execution(arn)
    assert (again["status"], again["error"], again["redriveCount"]) == (
        "FAILED",
        "ActionSettled",
        1,
    )
    assert "ticket 4711" not in again["cause"]
    assert _effects(saga, case_id) == effects
    assert get_item(saga, "CasesTableName", {"case_id": {"S": case_id}}) == record
    # Nobody is told of a refused rerun: no message for a decision already made.
    assert [m for m in _queue(saga) if m.get("case_id") == case_id] == []
    assert sagactl("escalations", "--json").json()["escalations"] == []

    # A new execution of the resolved case is a DUPLICATE, as it always was (§8).
    duplicate = saga.wait_for_execution(saga.start_case(case, name=f"{case_id}-again"))
    assert duplicate["status"] == "SUCCEEDED"
    assert json.loads(duplicate["output"])["outcome"] == "DUPLICATE"
    assert _effects(saga, case_id) == effects
    assert get_item(saga, "CasesTableName", {"case_id": {"S": case_id}}) == record


def test_a_late_delivery_past_its_gate_when_the_case_is_resolved_reserves_nothing(
    saga: LocalAws, sagactl: Sagactl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving, deterministic: a delivery of ReserveStock (its task timed out in Step
    Functions, the function still runs) reads the case record, under way, and passes its gate;
    a person resolves the stopped case; the delivery goes on to claim the reservation."""
    case_id = "case-late-reserve"
    arn = _stopped(saga, _case(case_id, reserve=["fail_before_commit"] * DELIVERIES))
    stock = _effects(saga, case_id)["stock"]
    target = local_target_from_outputs(saga.outputs)
    real_gate = accept_forward
    resolved: list[str] = []

    def gate_then_resolve(*args: Any) -> Accepted:
        key = real_gate(*args)  # passes: the case is under way and nobody decided yet
        report = resolve(target, case_id, decision=DECISION, by="ops@acme", budget=8)
        resolved.extend(report.settled)
        return key

    monkeypatch.setattr(reserve_module, "accept_forward", gate_then_resolve)
    history = saga.history(arn)
    [payload] = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]
        for e in history
        if e["type"] == "TaskScheduled"
    ][-1:]
    function = next(
        f["FunctionName"]
        for f in saga.client("lambda").list_functions()["Functions"]
        if f["FunctionName"].endswith("ReserveStockFunction")
    )
    with handlers_in_process():  # the patched gate is in this process
        response = saga.client("lambda").invoke(
            FunctionName=function, Payload=json.dumps(payload).encode()
        )
    answer = json.loads(response["Payload"].read())

    assert response.get("FunctionError") and answer["errorType"] == "ActionSettled", answer
    assert resolved and resolved[0] == f"acme#reserve#{case_id}.reserve"
    assert _effects(saga, case_id) == {
        "reservations": 0,
        "refunds": 0,
        "shipments": 0,
        "stock": stock,
    }
    reserve = get_item(saga, "LedgerTableName", {"action_key": {"S": resolved[0]}})
    assert reserve["status"]["S"] == "SETTLED" and "expires_at" not in reserve
