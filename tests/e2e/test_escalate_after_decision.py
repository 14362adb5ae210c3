"""A person's decision is final at the Escalate state too (docs/design.md §3.10, §6): an
execution that stopped at Escalate (its message could not be queued) and is redriven after a
person resolved the case ends FAILED with ActionSettled and queues no CASE_ESCALATED. So does
one redriven into reconciliation after the decision, and it pages nobody either."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from moto.sqs.models import SQSBackend

import saga.handlers.issue_refund as refund_module
from local_aws import event_rules
from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from saga.errors import ActionSettled
from sagactl.operations.escalations import resolve
from sagactl.target import local_target_from_outputs
from tests.e2e.held_functions import function_held
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


class Throttled(Exception):
    """Lambda refused the invoke (reserved concurrency 0): the function did not run."""


class TimedOut(Exception):
    """The function ran out of time before it reached the ledger: nothing was sent."""


# The local runtime reports the class name as the error type, as Step Functions names them.
Throttled.__name__ = "Lambda.TooManyRequestsException"
TimedOut.__name__ = "Sandbox.Timedout"


class Refusing:
    """A tool's handler in Lambda that fails with `error` while `failing` is set."""

    def __init__(self, handler: Callable[[Any, Any], Any], error: type[Exception]) -> None:
        self.handler, self.error = handler, error
        self.failing = True

    def __call__(self, event: Any, context: Any) -> Any:
        if self.failing:
            raise self.error("the function did not get to the ledger")
        return self.handler(event, context)


def _rule_deliveries(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(status, deliveries) of each execution status-change event the local AWS publishes: a
    delivery is the failed-execution rule matching it (its TriggeredRules, which the
    ExecutionsUnsuccessful alarm pages on) and queueing its message."""
    published: list[tuple[str, int]] = []
    publish = event_rules.publish

    def counted(event: Any, bus: str = event_rules.DEFAULT_BUS) -> int:
        delivered = publish(event, bus)
        published.append((str(event["detail"]["status"]), delivered))
        return delivered

    monkeypatch.setattr(event_rules, "publish", counted)
    return published


def _stopped_at_reconciliation(
    local: LocalAws, monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> Saga:
    """The refund's request times out (uncertain): ReconcileStep is invoked, and a person
    stops the execution while that invoke is in flight (ABORTED at ReconcileStep)."""
    case["sandbox"] = {"faults": {"refund": ["timeout"]}}
    sfn = local.client("stepfunctions")
    with function_held(monkeypatch, "ReconcileActionFunction") as waiting:
        arn = local.start_case(sign_locally(case))
        assert waiting.wait(timeout=60), "ReconcileStep was never invoked"
        sfn.stop_execution(executionArn=arn)
        local.wait_for_execution(arn)
    return Saga.of(local, case, arn)


def _failed_before_reconciliation(
    local: LocalAws, monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> Saga:
    """IssueRefund cannot be invoked (throttled, every retry): FAILED there, nothing sent. Its
    redriven delivery will run out of time before it reaches the ledger: a crash, which the
    workflow sends to ReconcileStep."""
    throttled = Refusing(refund_module.handler, Throttled)
    monkeypatch.setattr(refund_module, "handler", throttled)
    saga = Saga(local, sign_locally(case))
    monkeypatch.setattr(refund_module, "handler", Refusing(refund_module.handler, TimedOut))
    return saga


@pytest.mark.usefixtures("handlers_in_this_process")  # the patched handlers
@pytest.mark.parametrize(
    ("stopped", "status", "error"),
    [
        (_stopped_at_reconciliation, "ABORTED", None),
        (_failed_before_reconciliation, "FAILED", Throttled.__name__),
    ],
    ids=["at-reconciliation", "before-reconciliation"],
)
def test_a_redrive_into_reconciliation_after_a_decision_ends_quietly(
    local_aws: LocalAws,
    monkeypatch: pytest.MonkeyPatch,
    stopped: Callable[[LocalAws, pytest.MonkeyPatch, dict[str, Any]], Saga],
    status: str,
    error: str | None,
) -> None:
    """Issue 41, item 6: an execution stopped at reconciliation, or before it, is resolved by
    a person and redriven into ReconcileStep, which meets the decision. The execution ends
    FAILED with ActionSettled, the error the failed-execution rule excludes: no message is
    queued and the rule does not trigger, so the alarm pages nobody for a decision made."""
    case = copy.deepcopy(load_example("happy-path"))
    case["case_id"] = f"case-decided-{stopped.__name__.strip('_').replace('_', '-')}"
    published = _rule_deliveries(monkeypatch)

    saga = stopped(local_aws, monkeypatch, case)

    assert (saga.status, saga.description.get("error")) == (status, error), saga.path
    [message] = saga.escalations()  # the stop needs a person: the rule's message
    assert (message["kind"], message["status"]) == ("EXECUTION_NOT_SUCCEEDED", status)
    assert published[-1] == (status, 1)
    target = local_target_from_outputs(local_aws.outputs)
    resolve(target, case["case_id"], decision="refunded by hand", by="ops@acme", budget=8)
    published.clear()

    saga.redrive()

    assert (saga.status, saga.description.get("error")) == ("FAILED", ActionSettled.__name__)
    assert saga.path[-2:] == ["ReconcileStep", "CaseResolved"]
    assert "settled by ops@acme" in saga.description["cause"]
    assert "refunded by hand" not in saga.description["cause"]  # no decision text in errors
    assert saga.escalations() == []  # nothing queued for the decided case
    assert published == [("FAILED", 0)]  # the rule did not match: no TriggeredRules, no page
    assert saga.count_effects("PaymentsTableName") == 0
