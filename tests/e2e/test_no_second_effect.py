"""The holes of the "no second effect" review, closed, shown through the real state machine.

Each test runs the deployed definition and the real handlers in the local AWS, and counts
effects where they land (sandbox payments and shipments tables, inventory stock).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws, StackSource
from local_aws.lambda_errors import CrashNaming
from local_aws.lambda_runtime import (
    SimulatedCrash,
    crash_errors_named,
    handlers_in_process,
)
from saga.identity import Operation
from saga.sandbox.inventory import DEFAULT_STOCK
from saga.sandbox.payments import SandboxPaymentsService
from stacks.lambda_errors import Death
from tests.e2e.test_saga_paths import HAPPY_PATH, Saga, load_example


def variant(name: str, case_id: str, **faults: list[str]) -> dict[str, Any]:
    case = load_example(name)
    case["case_id"] = case_id
    if faults:
        case["sandbox"] = {"faults": faults}
    return sign_locally(case)


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
    assert entered == ["ValidateCase", "DuplicateCase"]  # caught, no state of its own
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
        *HAPPY_PATH[:3],
        "ReconcileStep",
        "AfterReconcile",
        "IssueRefund",
        *HAPPY_PATH[3:],
    ]
    assert saga.count_effects("PaymentsTableName") == 1
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["status"]["S"] == "COMPLETED"
    assert "first_dispatch_at" in refund  # it remembers that the first delivery may have sent
    assert saga.output["steps"]["refund"]["reconciled"] is True


@pytest.mark.parametrize(
    ("naming", "death", "error"),
    [
        (CrashNaming.CURRENT, Death.OUT_OF_MEMORY, "Runtime.OutOfMemory"),
        (CrashNaming.CURRENT, Death.EXITED, "Runtime.ExitError"),
        (CrashNaming.LAMBDA_UNKNOWN, Death.OUT_OF_MEMORY, "Lambda.Unknown"),
    ],
)
def test_a_refund_step_that_dies_after_sending_is_reconciled_not_failed(
    local_aws: LocalAws,
    monkeypatch: pytest.MonkeyPatch,
    naming: CrashNaming,
    death: Death,
    error: str,
) -> None:
    """The function dies after the provider committed the refund and before the ledger recorded
    it: Step Functions reports the error Lambda gives a dead process (today's name, or
    Lambda.Unknown), which goes to reconciliation (not FAILED with the effect unrecorded); the
    dead delivery's lease runs out and the lookup finds the refund."""
    commit = SandboxPaymentsService._commit_refund
    crashes: list[str] = []

    def commit_then_die(self: SandboxPaymentsService, *args: Any, **kwargs: Any) -> Any:
        response = commit(self, *args, **kwargs)
        if not crashes:
            crashes.append(args[0])
            # The process dies; by the time anyone looks, its lease has run out.
            local_aws.clock.advance(120)
            raise SimulatedCrash("after the refund was committed", death)
        return response

    monkeypatch.setattr(SandboxPaymentsService, "_commit_refund", commit_then_die)
    with crash_errors_named(naming), handlers_in_process():  # the patch is in this process
        saga = Saga(local_aws, variant("happy-path", f"case-crash-{naming}-{death}"))

    assert crashes, "the nemesis never fired"
    failed = [e for e in saga.history if e["type"] == "TaskFailed"]
    assert [e["taskFailedEventDetails"]["error"] for e in failed] == [error]
    assert (saga.status, saga.output["outcome"]) == ("SUCCEEDED", "COMPLETED")
    assert saga.path[:5] == [*HAPPY_PATH[:3], "ReconcileStep", "AfterReconcile"]
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


def test_a_completed_case_resubmitted_after_the_ledgers_retention_is_a_duplicate(
    local_aws: LocalAws,
) -> None:
    """31 days later DynamoDB's TTL has deleted the ledger records and the payment provider has
    forgotten the idempotency key; the carrier never had one. Only the case record (no TTL)
    still knows the case ran: the resubmission must not reach any downstream."""
    case = variant("happy-path", "case-late")
    first = Saga(local_aws, case)
    assert first.output["outcome"] == "COMPLETED"

    deleted = local_aws.clock.advance(31 * 86400).effects["ttl_deleted"]
    assert deleted.get(local_aws.outputs["LedgerTableName"]) == 3  # reserve, refund, ship
    assert first.ledger(Operation.REFUND) is None

    description, _ = local_aws.run_case(case, name="case-late-resubmitted")

    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"])["outcome"] == "DUPLICATE"
    assert first.count_effects("PaymentsTableName") == 1
    assert first.count_effects("ShipmentsTableName") == 1
    assert first.available("SKU-RED-MUG") == DEFAULT_STOCK["SKU-RED-MUG"] - 1
    assert first.ledger(Operation.REFUND) is None  # nothing was claimed again


def with_budget(local_aws: LocalAws, budget: int) -> LocalAws:
    """The same stack deployed with another `ledger.attempt_budget` (each function's
    ATTEMPT_BUDGET), in a fresh local account."""
    template = copy.deepcopy(local_aws.source.template)
    for resource in template["Resources"].values():
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if "ATTEMPT_BUDGET" in variables:
            variables["ATTEMPT_BUDGET"] = str(budget)
    other = LocalAws(
        server=local_aws.server,
        source=StackSource(template, local_aws.source.stack_name, local_aws.source.asl_path),
    )
    other.reprovision()
    return other


def test_chained_redrives_past_the_first_records_retention_finish_the_compensation(
    local_aws: LocalAws,
) -> None:
    """Each redrive comes 13 days after the previous close, inside Step Functions' 14-day
    window; the third one runs 39 days after the release's first delivery. The release stays
    open (UNKNOWN) in between, and an open record carries no retention (§3.7), so it is still
    there, still counts the lifetime budget, and the compensation finishes exactly once."""
    local = with_budget(local_aws, 20)
    case = variant(
        "compensation-stuck", "case-chained", shipment=["reject"], release=["timeout"] * 12
    )
    saga = Saga(local, case)
    assert saga.status == "FAILED"
    stock_reserved = saga.available("SKU-RED-MUG")
    for redrive in (1, 2):
        local.clock.advance(13 * 86400)
        saga.redrive()
        assert (saga.status, saga.description["redriveCount"]) == ("FAILED", redrive)
        record = saga.ledger(Operation.RELEASE)
        assert record is not None and record["status"]["S"] in ("IN_PROGRESS", "UNKNOWN")
        assert "expires_at" not in record  # open: TTL never deletes it

    local.clock.advance(13 * 86400)  # day 39: the first delivery's retention ran out at day 30
    saga.redrive()

    assert saga.status == "SUCCEEDED", saga.description.get("cause")
    assert (saga.status, saga.output["outcome"]) == ("SUCCEEDED", "ESCALATED")
    release = saga.ledger(Operation.RELEASE)
    assert release is not None and release["status"]["S"] == "COMPLETED"
    assert int(release["attempts"]["N"]) > 12  # the lifetime count went on: nothing reset it
    assert saga.available("SKU-RED-MUG") == stock_reserved + 1  # released exactly once
    assert saga.case_outcome() == "ESCALATED"
