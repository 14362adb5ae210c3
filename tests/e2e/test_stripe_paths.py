"""The saga's paths with refunds through Stripe: the real state machine, the real adapter on the
official SDK, the local Stripe server (local_aws.stripe) acting out the case's refund
faults, each execution started, followed and read with the real AWS CLI.

The scenarios are test_saga_paths.py's (the example cases), each with a payment made on the
server for it (`POST /v1/payment_intents` through the SDK, as a test payment is made). With
Stripe there is no payments table: refunds are counted on the server, by the case's
`metadata.case_id`. What each fault does there and what the adapter concludes:
local_aws/stripe/server.py and docs/design.md §3.13. `make test` runs a representative
subset (a happy path, a lost answer, a request in flight, a refusal); `make test-long` the rest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from local_aws.stripe.server import LOCAL_API_KEY
from saga.identity import Operation
from tests.cli.test_awscli import aws, run_with_cli
from tests.conftest import StripeAws
from tests.e2e.test_saga_paths import (
    ESCALATED_END,
    HAPPY_PATH,
    RELEASED_AT_REFUND,
    RELEASED_AT_SHIPMENT,
    Saga,
    load_example,
)

SIGNED_AT = "2026-11-30T00:00:00Z"
long_only = pytest.mark.skipif(
    os.environ.get("SAGA_LONG_TESTS") != "1", reason="the Stripe matrix: SAGA_LONG_TESTS=1"
)
RECONCILED = [*HAPPY_PATH[:3], "ReconcileStep", "AfterReconcile"]


def new_payment(stripe_aws: StripeAws, amount: int = 5000, card: str = "pm_card_visa") -> str:
    """A payment made on the local Stripe server as a test payment is made: through the SDK."""
    from saga.providers.stripe_provider import stripe_client

    client = stripe_client(LOCAL_API_KEY, 5.0, stripe_aws.stripe.url)
    intent = client.v1.payment_intents.create(
        params={"amount": amount, "currency": "usd", "confirm": True, "payment_method": card}
    )
    assert intent.status == "succeeded"
    return str(intent.id)


def stripe_case(
    stripe_aws: StripeAws, example: str, *, refund_faults: list[str] | None = None, **kw: Any
) -> dict[str, Any]:
    """The example case with its own payment on the server, approved again (the payment is
    part of what is signed); `refund_faults` replaces its refund faults."""
    case = load_example(example)
    case["case_id"] = f"stripe-{case['case_id']}"
    case["refund"]["payment_reference"] = new_payment(stripe_aws, **kw)
    if refund_faults is not None:
        case["sandbox"]["faults"]["refund"] = refund_faults
    case.pop("approval")
    case["approval"] = {"revision": 1, "approved_by": "supervisor@acme", "digest": ""}
    signed: dict[str, Any] = sign_locally(case, signed_at=SIGNED_AT)
    return signed


class StripeSaga(Saga):
    """A finished case, started and read with the AWS CLI; its refunds counted on the server."""

    def __init__(self, stripe_aws: StripeAws, case: dict[str, Any], tmp_path: Path) -> None:
        self.local = stripe_aws.local
        self.stripe = stripe_aws.stripe
        self.case = case
        self.case_id = case["case_id"]
        self.tenant = case["tenant_id"]
        self.ddb = self.local.client("dynamodb")
        case_file = tmp_path / f"{self.case_id}.json"
        case_file.write_text(json.dumps(case), encoding="utf-8")
        self.description, self.history = run_with_cli(self.local, case_file, self.case_id)

    def redrive(self) -> dict[str, Any]:
        arn = str(self.description["executionArn"])
        response: dict[str, Any] = aws(
            self.local, "stepfunctions", "redrive-execution", "--execution-arn", arn
        )
        self.description = self.local.wait_for_execution(arn)
        self.history = self.local.history(arn)
        return response

    def refunds(self) -> list[dict[str, Any]]:
        """The case's refunds on the local Stripe server."""
        return self.stripe.refunds(self.case_id)

    def stripe_calls(self) -> int:
        """The refund calls (refunds and lookups) the server answered for the case."""
        return self.stripe.faults.calls(self.case_id)


def the_refund_is_recorded_once(saga: StripeSaga) -> None:
    """One refund on the server, the ledger's COMPLETED record naming it, in the output too."""
    [made] = saga.refunds()
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["status"]["S"] == "COMPLETED"
    assert refund["downstream_ref"]["S"] == made["id"]
    assert saga.output["steps"]["refund"]["downstream_ref"] == made["id"]
    assert (made["amount"], made["currency"], made["status"]) == (2000, "usd", "succeeded")
    assert made["metadata"] == {"business_ref": f"{saga.case_id}.refund", "case_id": saga.case_id}


# --- make test ------------------------------------------------------------------------------------
def test_happy_path_refunds_once_at_stripe(stripe_aws: StripeAws, tmp_path: Path) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "happy-path"), tmp_path)

    assert saga.status == "SUCCEEDED", saga.events("TaskFailed")
    assert saga.path == HAPPY_PATH
    assert saga.output["outcome"] == "COMPLETED"
    the_refund_is_recorded_once(saga)
    assert saga.count_effects("ShipmentsTableName") == 1
    # No refund lands in the sandbox's table: the stack names none (sagactl says "not deployed").
    assert "PaymentsTableName" not in saga.local.outputs
    assert saga.case_outcome() == "COMPLETED"
    assert saga.stripe_calls() == 0  # no refund faults: no cursor


def test_lost_refund_response_is_found_at_stripe_not_refunded_again(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "lost-refund-response"), tmp_path)

    assert saga.status == "SUCCEEDED"
    assert saga.path == [*RECONCILED, "CreateShipment"]
    assert saga.output["steps"]["refund"]["reconciled"] is True
    the_refund_is_recorded_once(saga)
    assert saga.stripe_calls() == 2  # the refund (its answer lost), the lookup that found it


def test_a_refund_still_in_flight_commits_once_and_is_found(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    """No answer, the key held; the lookup finds nothing (then the refund commits); the step is
    re-entered with the same key and its delivery looks first: found."""
    saga = StripeSaga(
        stripe_aws, stripe_case(stripe_aws, "happy-path", refund_faults=["in_flight"]), tmp_path
    )

    assert saga.status == "SUCCEEDED"
    assert saga.path == [*RECONCILED, "IssueRefund", "CreateShipment"]
    assert saga.output["outcome"] == "COMPLETED"
    the_refund_is_recorded_once(saga)
    assert saga.stripe_calls() == 3


def test_a_refund_stripe_refuses_releases_the_reservation_and_escalates(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    """A disputed charge: Stripe's own refusal (400 charge_disputed), no fault involved."""
    case = stripe_case(stripe_aws, "happy-path", card="pm_card_createDispute")
    saga = StripeSaga(stripe_aws, case, tmp_path)

    assert saga.status == "SUCCEEDED"
    assert saga.path == RELEASED_AT_REFUND
    assert saga.output["escalation"]["reason"] == "REFUND_REJECTED"
    assert "charged back" in json.dumps(saga.output["escalation"]["detail"])
    assert saga.refunds() == []
    assert saga.ledger_status(Operation.REFUND) == "FAILED"
    assert saga.ledger_status(Operation.RELEASE) == "COMPLETED"
    assert saga.case_outcome() == "ESCALATED"


# --- make test-long: the rest of the matrix -------------------------------------------------------
@pytest.mark.parametrize(
    ("faults", "path", "calls"),
    [
        # A 500 before executing: uncertain to the adapter; the lookup finds nothing, the same
        # key goes again (its delivery looks first, then sends).
        (["fail_before_commit"], [*RECONCILED, "IssueRefund", "CreateShipment"], 4),
        # Held until the adapter's read timeout: the same.
        (["timeout"], [*RECONCILED, "IssueRefund", "CreateShipment"], 4),
        # A 409 as when another request holds the key: the same.
        (["key_in_use"], [*RECONCILED, "IssueRefund", "CreateShipment"], 4),
        # A 429: not sent; the Retry repeats the step.
        (["rate_limited"], HAPPY_PATH, 2),
        (["rate_limited", "rate_limited"], HAPPY_PATH, 3),
    ],
    ids=["fail_before_commit", "timeout", "key_in_use", "rate_limited", "rate_limited_twice"],
)
@pytest.mark.slow
@long_only
def test_faults_that_leave_no_refund_end_with_exactly_one(
    stripe_aws: StripeAws,
    tmp_path: Path,
    faults: list[str],
    path: list[str],
    calls: int,
) -> None:
    case = stripe_case(stripe_aws, "happy-path", refund_faults=faults)
    saga = StripeSaga(stripe_aws, case, tmp_path)

    assert saga.status == "SUCCEEDED"
    assert saga.path == path
    assert saga.output["outcome"] == "COMPLETED"
    the_refund_is_recorded_once(saga)
    assert saga.stripe_calls() == calls


@pytest.mark.parametrize(
    "faults",
    [["unavailable"], ["server_error"]],
    ids=["unavailable", "server_error_replayed"],
)
@pytest.mark.slow
@long_only
def test_when_stripe_cannot_tell_a_person_decides_and_nothing_is_undone(
    stripe_aws: StripeAws, tmp_path: Path, faults: list[str]
) -> None:
    """503 from then on (the lookup cannot tell), or a 500 stored for the key and replayed to
    every re-attempt: the refund's outcome stays unknown; the case escalates with it UNKNOWN
    and keeps the reservation (the refund may exist), no refund was made."""
    saga = StripeSaga(
        stripe_aws, stripe_case(stripe_aws, "happy-path", refund_faults=faults), tmp_path
    )

    assert saga.status == "SUCCEEDED"
    assert saga.path[-3:] == ["ReconcileStep", "AfterReconcile", *ESCALATED_END]
    escalation = saga.output["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("OUTCOME_UNCERTAIN", "refund")
    assert saga.output["compensations"] == []
    assert saga.refunds() == []
    assert saga.ledger_status(Operation.REFUND) == "UNKNOWN"
    assert saga.case_outcome() == "ESCALATED"


@pytest.mark.slow
@long_only
def test_the_reject_fault_is_a_refusal_stripe_stores(stripe_aws: StripeAws, tmp_path: Path) -> None:
    saga = StripeSaga(
        stripe_aws, stripe_case(stripe_aws, "refund-rejected", refund_faults=["reject"]), tmp_path
    )

    assert saga.path == RELEASED_AT_REFUND
    assert saga.output["escalation"]["reason"] == "REFUND_REJECTED"
    assert saga.refunds() == []
    assert saga.ledger_status(Operation.REFUND) == "FAILED"


@pytest.mark.slow
@long_only
def test_a_rejected_shipment_keeps_the_stripe_refund(stripe_aws: StripeAws, tmp_path: Path) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "shipment-rejected"), tmp_path)

    assert saga.path == RELEASED_AT_SHIPMENT
    assert saga.output["escalation"]["reason"] == "SHIPMENT_REJECTED"
    the_refund_is_recorded_once(saga)


@pytest.mark.slow
@long_only
def test_a_lost_carrier_answer_ships_once_after_one_stripe_refund(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "lost-carrier-response"), tmp_path)

    assert saga.status == "SUCCEEDED"
    assert saga.path == [*HAPPY_PATH, "ReconcileStep", "AfterReconcile", "RecordOutcome"]
    assert saga.output["outcome"] == "COMPLETED"
    the_refund_is_recorded_once(saga)
    assert saga.count_effects("ShipmentsTableName") == 1
    assert saga.ledger_status(Operation.SHIP) == "COMPLETED"


@pytest.mark.slow
@long_only
def test_carrier_unavailable_escalates_keeping_the_stripe_refund(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    """The shipment's outcome stays unknown: a person decides; the refund made at Stripe is a
    confirmed effect, never undone."""
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "carrier-unavailable"), tmp_path)

    assert saga.status == "SUCCEEDED"
    assert saga.path[-3:] == ["ReconcileStep", "AfterReconcile", *ESCALATED_END]
    escalation = saga.output["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("OUTCOME_UNCERTAIN", "ship")
    assert saga.output["compensations"] == []
    the_refund_is_recorded_once(saga)
    assert saga.count_effects("ShipmentsTableName") == 0
    assert saga.ledger_status(Operation.SHIP) == "UNKNOWN"
    assert saga.case_outcome() == "ESCALATED"


@pytest.mark.slow
@long_only
def test_a_case_changed_after_its_approval_fails_before_reaching_stripe(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    case = stripe_case(stripe_aws, "happy-path")
    case["refund"]["amount_minor"] = 1999  # not what was approved

    saga = StripeSaga(stripe_aws, case, tmp_path)

    assert saga.status == "FAILED"
    assert saga.path == ["ValidateCase", "RejectCase"]
    failed = saga.events("ExecutionFailed")[0]["executionFailedEventDetails"]
    assert failed["error"] == "ApprovalMismatch"
    assert "Traceback" not in failed["cause"]
    for op in (Operation.RESERVE, Operation.REFUND, Operation.SHIP):
        assert saga.ledger(op) is None
    assert saga.refunds() == [] and saga.stripe.refunds() == []


@pytest.mark.slow
@long_only
def test_out_of_stock_never_reaches_stripe(stripe_aws: StripeAws, tmp_path: Path) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "out-of-stock"), tmp_path)

    assert saga.path == [*HAPPY_PATH[:2], *ESCALATED_END]
    assert saga.refunds() == []


@pytest.mark.slow
@long_only
def test_a_stuck_compensation_redriven_refunds_once_in_all(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "compensation-stuck"), tmp_path)
    assert saga.status == "FAILED"
    assert saga.case_outcome() == "COMPENSATION_PENDING"

    saga.redrive()

    assert saga.status == "SUCCEEDED"
    assert saga.output["outcome"] == "ESCALATED"
    the_refund_is_recorded_once(saga)


@pytest.mark.slow
@long_only
def test_a_completed_case_started_again_is_a_duplicate_with_no_second_refund(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    case = stripe_case(stripe_aws, "happy-path")
    first = StripeSaga(stripe_aws, case, tmp_path)
    assert first.output["outcome"] == "COMPLETED"
    second_file = tmp_path / "again.json"
    second_file.write_text(json.dumps(case), encoding="utf-8")

    description, _ = run_with_cli(stripe_aws.local, second_file, f"{case['case_id']}-again")

    assert json.loads(description["output"])["outcome"] == "DUPLICATE"
    assert len(first.refunds()) == 1


def test_a_case_with_refund_faults_is_refused_where_refunds_go_to_stripe_itself(
    stripe_aws: StripeAws, tmp_path: Path
) -> None:
    """Without STRIPE_API_BASE (Stripe's own API) nobody acts out refund faults: ValidateCase
    refuses the case before any effect."""
    client = stripe_aws.local.client("lambda")
    name = next(n for n in stripe_aws.local.provisioned.functions.values() if "ValidateCase" in n)  # type: ignore[union-attr]
    variables = client.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
    variables.pop("STRIPE_API_BASE")
    client.update_function_configuration(FunctionName=name, Environment={"Variables": variables})

    saga = StripeSaga(stripe_aws, stripe_case(stripe_aws, "lost-refund-response"), tmp_path)

    assert saga.status == "FAILED"
    failed = saga.events("ExecutionFailed")[0]["executionFailedEventDetails"]
    assert failed["error"] == "InvalidRequest"
    assert "remove sandbox.faults.refund" in failed["cause"]
    assert saga.ledger(Operation.RESERVE) is None and saga.refunds() == []
