"""The holes of the "no second effect" review, closed, shown through the real state machine.

Each test runs the deployed definition and the real handlers in the local AWS, and counts
effects where they land (sandbox payments and shipments tables, inventory stock).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from saga import clock as saga_clock
from saga.identity import Operation
from saga.models import with_approval_digest
from saga.sandbox.inventory import DEFAULT_STOCK
from saga.sandbox.payments import SandboxPaymentsService
from sagactl.local.environment import LocalAws
from sagactl.local.lambda_runtime import SimulatedCrash
from tests.e2e.test_saga_paths import HAPPY_PATH, Saga, load_example


def variant(name: str, case_id: str, **faults: list[str]) -> dict[str, Any]:
    case = load_example(name)
    case["case_id"] = case_id
    if faults:
        case["sandbox"] = {"faults": faults}
    return with_approval_digest(case)


@contextmanager
def clock_moved_by(seconds: float) -> Iterator[None]:
    """The Lambda code's clock, `seconds` ahead (the handlers run in this process)."""
    previous = saga_clock.use(lambda: time.time() + seconds)
    try:
        yield
    finally:
        saga_clock.use(previous)


def test_a_new_execution_of_a_completed_case_is_a_duplicate_with_no_effect(
    local_aws: LocalAws,
) -> None:
    case = variant("happy-path", "case-resubmitted")
    first = Saga(local_aws, case)
    assert (first.status, first.output["outcome"]) == ("SUCCEEDED", "COMPLETED")
    original_arn = first.description["executionArn"]

    # The same approved case again, under another execution name (the console, an agent's
    # retry, a script): the case record binds the case to its first execution.
    description, history = local_aws.run_case(case, name="case-resubmitted-again")

    assert description["status"] == "SUCCEEDED"  # a duplicate must page nobody
    assert json.loads(description["output"]) == {
        "case_id": "case-resubmitted",
        "outcome": "DUPLICATE",
        "original_execution_arn": original_arn,
    }
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e
    ]
    assert entered == ["ValidateCase", "NewOrDuplicate", "DuplicateCase"]
    assert (
        first.count_effects("PaymentsTableName"),
        first.count_effects("ShipmentsTableName"),
    ) == (
        1,
        1,
    )
    assert first.case_outcome() == "COMPLETED"
    assert first.escalations() == []


def test_a_request_the_provider_still_processes_is_found_not_sent_again(
    local_aws: LocalAws,
) -> None:
    """`in_flight`: the refund call gets no answer and commits late, after the next lookup
    answered "not found". The re-attempt goes out with the same key inside the provider's key
    retention and is looked up first: one refund."""
    case = variant("happy-path", "case-in-flight", refund=["in_flight"])
    saga = Saga(local_aws, case)

    assert (saga.status, saga.output["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "IssueRefund",
        "ReconcileStep",
        "AfterReconcile",
        "IssueRefund",
        "CreateShipment",
        "RecordOutcome",
    ]
    assert saga.count_effects("PaymentsTableName") == 1
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["status"]["S"] == "COMPLETED"
    assert "first_dispatch_at" in refund  # it remembers that the first delivery may have sent
    assert saga.output["steps"]["refund"]["reconciled"] is True


def test_a_refund_step_that_dies_after_sending_is_reconciled_not_failed(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The function crashes after the provider committed the refund and before the ledger
    recorded it: AWS reports Lambda.Unknown, which goes to reconciliation (not FAILED with the
    effect unrecorded); the crashed delivery's lease runs out and the lookup finds the refund."""
    commit = SandboxPaymentsService._commit_refund
    crashes: list[str] = []

    def commit_then_die(self: SandboxPaymentsService, *args: Any, **kwargs: Any) -> Any:
        response = commit(self, *args, **kwargs)
        if not crashes:
            crashes.append(args[0])
            # The process dies; by the time anyone looks, its lease has run out.
            saga_clock.use(lambda: time.time() + 120)
            raise SimulatedCrash("out of memory after the refund was committed")
        return response

    monkeypatch.setattr(SandboxPaymentsService, "_commit_refund", commit_then_die)
    try:
        saga = Saga(local_aws, variant("happy-path", "case-crash-after-refund"))
    finally:
        saga_clock.use(time.time)

    assert crashes, "the nemesis never fired"
    failed = [e for e in saga.history if e["type"] == "TaskFailed"]
    assert [e["taskFailedEventDetails"]["error"] for e in failed] == ["Lambda.Unknown"]
    assert (saga.status, saga.output["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert saga.path[:6] == [*HAPPY_PATH[:4], "ReconcileStep", "AfterReconcile"]
    assert saga.count_effects("PaymentsTableName") == 1
    assert saga.count_effects("ShipmentsTableName") == 1
    assert saga.output["steps"]["refund"]["reconciled"] is True


def test_an_address_a_carrier_would_refuse_is_rejected_before_any_effect(
    local_aws: LocalAws,
) -> None:
    stock_before = DEFAULT_STOCK["SKU-RED-MUG"]  # freshly seeded
    case = load_example("happy-path")
    case["case_id"] = "case-blank-line"
    case["shipment"]["address"]["line1"] = "   "
    case["approval"]["digest"] = "sha256:" + "0" * 64  # cannot be approved: it does not parse
    saga = Saga(local_aws, case)

    assert saga.status == "FAILED"
    assert saga.path == ["ValidateCase", "RejectCase"]
    failed = saga.events("ExecutionFailed")[0]["executionFailedEventDetails"]
    assert failed["error"] == "InvalidRequest"
    assert "shipment.address.line1" in failed["cause"] and "blank" in failed["cause"]
    assert saga.available("SKU-RED-MUG") == stock_before
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.case_outcome() is None
