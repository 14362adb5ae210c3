"""The thin Lambda handlers against moto: payload parsing, wiring from the environment, and the
saga's happy path plus typed errors exactly as the state machine sees them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga.errors import (
    ApprovalMismatch,
    AuthorizationDenied,
    InvalidRequest,
    OutcomeUnknown,
    RefundRejected,
)
from saga.handlers import (
    create_shipment,
    issue_refund,
    reconcile_action,
    record_outcome,
    release_reservation,
    reserve_stock,
    validate_case,
)
from saga.settings import ConfigurationError
from tests.tools_harness import ToolsEnv, raw_case, tools_env


@dataclass
class FakeContext:
    aws_request_id: str = "req-1"
    function_name: str = "saga-tool"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:saga-tool"
    function_version: str = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return 25_000


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, stack_tables: StackTables) -> Iterator[ToolsEnv]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SagaTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "saga-tools-test")
    with tools_env(stack_tables) as tools:
        for name, value in tools.env_vars().items():
            monkeypatch.setenv(name, value)
        yield tools


def attempt(state: str, retry: int = 0) -> dict[str, Any]:
    return {
        "execution": "arn:aws:states:us-east-1:1:execution:sm:x",
        "state": state,
        "retry": retry,
    }


def validated(case: dict[str, Any]) -> dict[str, Any]:
    """The case as ValidateCase accepts and records it (forward steps need its record)."""
    result = validate_case.handler(
        {"case": case, "attempt": attempt("ValidateCase")}, FakeContext()
    )
    return dict(result["case"])


def test_the_happy_path_through_every_handler(env: ToolsEnv) -> None:
    validated = validate_case.handler(
        {"case": raw_case(), "attempt": attempt("ValidateCase")}, FakeContext()
    )
    case = validated["case"]
    assert validated["actions"]["ship"]["action_key"] == "acme#ship#case-0001.ship"
    steps = {}
    for name, module, state in (
        ("reserve", reserve_stock, "ReserveStock"),
        ("refund", issue_refund, "IssueRefund"),
        ("ship", create_shipment, "CreateShipment"),
    ):
        steps[name] = module.handler({"case": case, "attempt": attempt(state)}, FakeContext())
        assert steps[name]["status"] == "COMPLETED" and steps[name]["attempts"] == 1
    assert set(steps["refund"]) == {
        "action_key",
        "status",
        "downstream_ref",
        "result",
        "replayed",
        "reconciled",
        "attempts",
    }
    output = record_outcome.handler(
        {
            "case": case,
            "outcome": "COMPLETED",
            "steps": steps,
            "compensations": [],
            "escalation": None,
            "attempt": attempt("RecordOutcome"),
        },
        FakeContext(),
    )
    assert output["outcome"] == "COMPLETED" and output["escalation"] is None
    assert (env.refunds("case-0001"), env.shipments("case-0001")) == (1, 1)
    assert env.available("SKU-RED-MUG") == 99
    record = env.case_record("case-0001")
    assert record is not None and record["outcome"] == "COMPLETED"


def test_invalid_payloads_are_invalid_requests_naming_the_field(env: ToolsEnv) -> None:
    bad = raw_case()
    bad["refund"]["amount_minor"] = "20"
    with pytest.raises(InvalidRequest, match=r"invalid case: refund.amount_minor"):
        validate_case.handler({"case": bad, "attempt": attempt("ValidateCase")}, FakeContext())
    with pytest.raises(InvalidRequest, match=r"ReserveStock payload: attempt: Field required"):
        reserve_stock.handler({"case": raw_case()}, FakeContext())
    with pytest.raises(InvalidRequest, match=r"attempt.retry"):
        issue_refund.handler(
            {"case": raw_case(), "attempt": {**attempt("IssueRefund"), "retry": -1}}, FakeContext()
        )
    assert env.items("CASES_TABLE") == [] and env.items("LEDGER_TABLE") == []


def test_lost_refund_then_reconcile_and_rejected_refund_then_release(env: ToolsEnv) -> None:
    lost = validated(raw_case("case-lost", faults={"refund": ["lose_response"]}))
    with pytest.raises(OutcomeUnknown):
        issue_refund.handler({"case": lost, "attempt": attempt("IssueRefund")}, FakeContext())
    answer = reconcile_action.handler(
        {"case": lost, "attempt": attempt("ReconcileStep"), "step": "refund"}, FakeContext()
    )
    assert answer["decision"] == "RESUME" and answer["result"]["reconciled"] is True
    assert env.refunds("case-lost") == 1

    rejected = validated(raw_case("case-rej", faults={"refund": ["reject"]}))
    reserve_stock.handler({"case": rejected, "attempt": attempt("ReserveStock")}, FakeContext())
    with pytest.raises(RefundRejected):
        issue_refund.handler({"case": rejected, "attempt": attempt("IssueRefund")}, FakeContext())
    released = release_reservation.handler(
        {"case": rejected, "attempt": attempt("ReleaseReservation")}, FakeContext()
    )
    assert released["result"]["status"] == "RELEASED"
    assert env.available("SKU-RED-MUG") == 100
    record = env.case_record("case-rej")
    assert record is not None and record["outcome"] == "COMPENSATION_PENDING"


def _escalated() -> dict[str, Any]:
    """A case reserved, then ended ESCALATED by RecordOutcome (the Escalate state)."""
    case = validated(raw_case())
    reserved = reserve_stock.handler(
        {"case": case, "attempt": attempt("ReserveStock")}, FakeContext()
    )
    record_outcome.handler(
        {
            "case": case,
            "outcome": "ESCALATED",
            "steps": {"reserve": reserved},
            "compensations": [],
            "escalation": {
                "reason": "REFUND_UNCERTAIN",
                "step": "refund",
                "detail": "the provider did not answer",
                "decision_needed": "refund by hand or not",
            },
            "attempt": attempt("RecordOutcome"),
        },
        FakeContext(),
    )
    return case


def _compensation_pending() -> dict[str, Any]:
    """A case reserved, its refund rejected and the reservation released."""
    case = validated(raw_case(faults={"refund": ["reject"]}))
    reserve_stock.handler({"case": case, "attempt": attempt("ReserveStock")}, FakeContext())
    with pytest.raises(RefundRejected):
        issue_refund.handler({"case": case, "attempt": attempt("IssueRefund")}, FakeContext())
    release_reservation.handler(
        {"case": case, "attempt": attempt("ReleaseReservation")}, FakeContext()
    )
    return case


@pytest.mark.parametrize(
    ("end", "outcome"),
    [(_escalated, "ESCALATED"), (_compensation_pending, "COMPENSATION_PENDING")],
    ids=["escalated", "compensation-pending"],
)
@pytest.mark.parametrize(
    ("module", "state"),
    [
        (reserve_stock, "ReserveStock"),
        (issue_refund, "IssueRefund"),
        (create_shipment, "CreateShipment"),
    ],
    ids=["reserve", "refund", "ship"],
)
def test_a_forward_tool_refuses_a_signed_case_no_longer_under_way(
    env: ToolsEnv, end: Callable[[], dict[str, Any]], outcome: str, module: Any, state: str
) -> None:
    """A direct invoke of a forward tool with the genuine, correctly signed case after the case
    left IN_PROGRESS (docs/design.md §9): the signature outlives the case, the case record does
    not, so the tool refuses before the ledger is touched (AuthorizationDenied naming the
    record's state): no refund, no shipment, no stock taken, no record written."""
    case = end()
    ledger, cases = env.items("LEDGER_TABLE"), env.items("CASES_TABLE")
    stock, reservations = env.available("SKU-RED-MUG"), env.reservations("case-0001")
    record = env.case_record("case-0001")
    assert record is not None and record["outcome"] == outcome
    assert (env.refunds("case-0001"), env.shipments("case-0001")) == (0, 0)

    with pytest.raises(AuthorizationDenied) as refused:
        module.handler({"case": case, "attempt": attempt(state, retry=1)}, FakeContext())

    assert refused.value.message == (
        f"case case-0001: not a case under way (case record {outcome}): a forward step runs "
        "only in the execution ValidateCase accepted it for, until the case ends"
    )
    assert (env.refunds("case-0001"), env.shipments("case-0001")) == (0, 0)
    assert env.available("SKU-RED-MUG") == stock
    assert env.reservations("case-0001") == reservations
    assert env.items("LEDGER_TABLE") == ledger
    assert env.items("CASES_TABLE") == cases


@pytest.mark.parametrize(
    ("module", "state", "extra"),
    [
        (reserve_stock, "ReserveStock", {}),
        (issue_refund, "IssueRefund", {}),
        (create_shipment, "CreateShipment", {}),
        (release_reservation, "ReleaseReservation", {}),
        (reconcile_action, "ReconcileStep", {"step": "refund"}),
        (record_outcome, "RecordOutcome", {"outcome": "COMPLETED"}),
    ],
)
def test_every_tool_refuses_a_case_edited_after_approval_and_changes_nothing(
    env: ToolsEnv, module: Any, state: str, extra: dict[str, Any]
) -> None:
    """A direct invoke with a case whose parameters are not the approved ones (the digest of
    another amount) is refused by the tool itself, not only by ValidateCase: no ledger record,
    no case record, no effect."""
    validate_case.handler({"case": raw_case(), "attempt": attempt("ValidateCase")}, FakeContext())
    cases_before = env.items("CASES_TABLE")
    tampered = raw_case()
    tampered["refund"]["amount_minor"] = 2_000_000  # the approval covers 2000
    with pytest.raises(ApprovalMismatch, match="re-approve"):
        module.handler({"case": tampered, "attempt": attempt(state), **extra}, FakeContext())
    assert env.items("LEDGER_TABLE") == []
    assert env.items("CASES_TABLE") == cases_before
    assert (env.refunds("case-0001"), env.shipments("case-0001")) == (0, 0)
    assert env.available("SKU-RED-MUG") == 100


@pytest.mark.parametrize(
    ("invoke", "variable"),
    [
        ((validate_case, "ValidateCase", {}), "APPROVAL_KEYS"),
        ((reserve_stock, "ReserveStock", {}), "ATTEMPT_BUDGET"),
        ((issue_refund, "IssueRefund", {}), "DOWNSTREAM_TIMEOUT_SECONDS"),
        ((create_shipment, "CreateShipment", {}), "LEDGER_TABLE"),
        ((release_reservation, "ReleaseReservation", {}), "CASES_TABLE"),
        ((reconcile_action, "ReconcileStep", {"step": "refund"}), "RESERVATIONS_TABLE"),
        ((record_outcome, "RecordOutcome", {"outcome": "COMPLETED"}), "POWERTOOLS_LOG_LEVEL"),
    ],
)
def test_a_function_missing_a_variable_fails_naming_it_and_changes_nothing(
    env: ToolsEnv,
    monkeypatch: pytest.MonkeyPatch,
    invoke: tuple[Any, str, dict[str, Any]],
    variable: str,
) -> None:
    """The handler validates its function's environment model before it touches anything: a
    deployment fault (ConfigurationError, never routed as a business outcome) naming it."""
    module, state, extra = invoke
    validated = validate_case.handler(
        {"case": raw_case(), "attempt": attempt("ValidateCase")}, FakeContext()
    )
    cases_before = env.items("CASES_TABLE")
    monkeypatch.delenv(variable)
    event = {"case": validated["case"], "attempt": attempt(state), **extra}
    if module is validate_case:
        event["case"] = raw_case(case_id="case-0002")
    with pytest.raises(ConfigurationError, match=f"{variable} is required by this function"):
        module.handler(event, FakeContext())
    assert env.items("LEDGER_TABLE") == []
    assert env.items("CASES_TABLE") == cases_before
    assert (env.refunds("case-0001"), env.shipments("case-0001")) == (0, 0)
    assert env.available("SKU-RED-MUG") == 100
