"""A genuine signed case invoked directly on a forward tool, outside the saga that ValidateCase
started for it (docs/design.md §9): a signature says what a person approved, not that the saga
accepted it now. Without a case record of this very case still under way, a forward tool must
change nothing: otherwise an approval whose start deadline passed could be carried out anyway,
and a finished case could be replayed once its ledger records have expired (a second refund)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from saga.errors import AuthorizationDenied, ReservationNotHeld
from saga.handlers import (
    create_shipment,
    issue_refund,
    record_outcome,
    release_reservation,
    reserve_stock,
    validate_case,
)
from sagactl.local.approval_keys import sign_locally
from tests.integration.test_tools_handlers import FakeContext, attempt
from tests.local_clock import local_clock  # noqa: F401  (fixture)
from tests.tools_harness import BASE_CASE, ToolsEnv, raw_case, tools_env

FORWARD = (
    ("reserve", reserve_stock, "ReserveStock"),
    ("refund", issue_refund, "IssueRefund"),
    ("ship", create_shipment, "CreateShipment"),
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[ToolsEnv]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SagaTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "saga-tools-test")
    with tools_env() as tools:
        for name, value in tools.env_vars().items():
            monkeypatch.setenv(name, value)
        yield tools


def run_saga(case: dict[str, Any]) -> dict[str, Any]:
    """ValidateCase, the forward steps and RecordOutcome, as the state machine calls them."""
    validated: dict[str, Any] = validate_case.handler(
        {"case": case, "attempt": attempt("ValidateCase")}, FakeContext()
    )["case"]
    steps = {
        name: module.handler({"case": validated, "attempt": attempt(state)}, FakeContext())
        for name, module, state in FORWARD
    }
    record_outcome.handler(
        {
            "case": validated,
            "outcome": "COMPLETED",
            "steps": steps,
            "compensations": [],
            "escalation": None,
            "attempt": attempt("RecordOutcome"),
        },
        FakeContext(),
    )
    return validated


def test_a_finished_case_replayed_after_its_ledger_expired_is_refused(
    env: ToolsEnv,
    local_clock: Callable[[float], None],  # noqa: F811
) -> None:
    case = run_saga(raw_case("case-replayed"))
    assert (env.refunds("case-replayed"), env.shipments("case-replayed")) == (1, 1)
    stock = env.available("SKU-RED-MUG")

    local_clock(40 * 86400)  # past the ledger's retention and the provider's key retention
    for item in env.items("LEDGER_TABLE"):  # what DynamoDB's TTL deletion does by then
        env.client.delete_item(
            TableName=env.names["LEDGER_TABLE"], Key={"action_key": item["action_key"]}
        )
    for _, module, state in reversed(FORWARD):  # the refund first: what a replay is after
        with pytest.raises(AuthorizationDenied, match="not a case under way"):
            module.handler({"case": case, "attempt": attempt(state)}, FakeContext())
        assert (env.refunds("case-replayed"), env.shipments("case-replayed")) == (1, 1)

    assert env.items("LEDGER_TABLE") == []
    assert env.available("SKU-RED-MUG") == stock


def test_a_signed_case_that_never_started_is_refused_by_every_forward_tool(
    env: ToolsEnv,
) -> None:
    """Its start deadline passed (ValidateCase would refuse it): a direct invoke must too."""
    late = sign_locally(
        {**BASE_CASE, "case_id": "case-late"},
        signed_at="2026-11-30T00:00:00Z",
        start_by="2026-11-30T01:00:00Z",
    )
    for _, module, state in FORWARD:
        with pytest.raises(AuthorizationDenied, match="not a case under way"):
            module.handler({"case": late, "attempt": attempt(state)}, FakeContext())

    assert env.items("LEDGER_TABLE") == [] and env.items("CASES_TABLE") == []
    assert (env.refunds("case-late"), env.shipments("case-late")) == (0, 0)
    assert env.reservations("case-late") == []


def test_a_completed_case_is_never_released_after_its_ledger_expired(
    env: ToolsEnv,
    local_clock: Callable[[float], None],  # noqa: F811
) -> None:
    """The compensation route must not become an effect of its own: a completed case shipped
    its reserved stock, so a release (its signature is genuine, its execution ARN is the case
    id) must not give that stock back once the ship record that guards it has expired."""
    case = run_saga(raw_case("case-shipped"))
    stock = env.available("SKU-RED-MUG")
    local_clock(40 * 86400)
    for item in env.items("LEDGER_TABLE"):
        env.client.delete_item(
            TableName=env.names["LEDGER_TABLE"], Key={"action_key": item["action_key"]}
        )

    with pytest.raises(ReservationNotHeld, match="COMPLETED"):
        release_reservation.handler(
            {"case": case, "attempt": attempt("ReleaseReservation")}, FakeContext()
        )

    assert env.available("SKU-RED-MUG") == stock
    assert [r["status"]["S"] for r in env.reservations("case-shipped")] == ["HELD"]
    assert env.items("LEDGER_TABLE") == []
    record = env.case_record("case-shipped")
    assert record is not None and record["outcome"] == "COMPLETED"
