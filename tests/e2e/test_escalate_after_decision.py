"""A person's decision is final at the Escalate state too (docs/design.md §3.10, §6): an
execution that stopped at Escalate (its message could not be queued) and is redriven after a
person resolved the case ends FAILED with ActionSettled and queues no CASE_ESCALATED."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from moto.sqs.models import SQSBackend

from sagactl.local.approval_keys import sign_locally
from sagactl.local.environment import LocalAws
from tests.e2e.test_lean_happy_path import DECIDED, _resolve
from tests.e2e.test_saga_paths import HAPPY_PATH, Saga, load_example


def test_a_redrive_at_escalate_after_a_decision_sends_no_escalation(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = copy.deepcopy(load_example("out-of-stock"))
    case["case_id"] = "case-escalate-redriven-after-decision"
    case = sign_locally(case)
    send = SQSBackend.send_message
    refused: list[str] = []

    def queue_down_for_escalations(
        self: SQSBackend, queue_name: str, message_body: str, *args: Any, **kwargs: Any
    ) -> Any:
        if '"CASE_ESCALATED"' in message_body and case["case_id"] in message_body:
            refused.append(message_body)
            raise RuntimeError("the escalation queue is unavailable")
        return send(self, queue_name, message_body, *args, **kwargs)

    monkeypatch.setattr(SQSBackend, "send_message", queue_down_for_escalations)
    saga = Saga(local_aws, case)

    assert refused, "Escalate never tried to queue its message"
    assert (saga.status, saga.path) == ("FAILED", [*HAPPY_PATH[:2], "Escalate"])
    [stopped] = saga.escalations()  # the failed-execution rule's, for a person to work
    assert stopped["kind"] == "EXECUTION_NOT_SUCCEEDED"

    _resolve(local_aws, case)  # a person decides the case the stopped execution left
    monkeypatch.setattr(SQSBackend, "send_message", send)  # the queue is back
    saga.redrive()

    assert [m["kind"] for m in saga.escalations()] == []  # the rule skips ActionSettled too
    assert saga.status == "FAILED"
    assert saga.path[-1] == "Escalate"
    failed = saga.events("TaskFailed")[-1]["taskFailedEventDetails"]
    assert failed["error"] == "ActionSettled"
    assert "resolved by ops@acme" in failed["cause"] and DECIDED.decision not in failed["cause"]
    record = local_aws.client("dynamodb").get_item(
        TableName=local_aws.outputs["CasesTableName"],
        Key={"case_id": {"S": case["case_id"]}},
        ConsistentRead=True,
    )["Item"]
    assert record["resolution"]["M"]["by"]["S"] == "ops@acme"
    assert saga.count_effects("PaymentsTableName") == saga.count_effects("ShipmentsTableName") == 0
