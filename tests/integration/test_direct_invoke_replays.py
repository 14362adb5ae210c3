"""A genuine signed case invoked directly on a forward tool, outside the saga that ValidateCase
started for it (docs/design.md §9): a signature says what a person approved, not that the saga
accepted it now. Without a case record of this very case still under way, a forward tool must
change nothing: otherwise an approval whose start deadline passed could be carried out anyway,
and a finished case could be replayed once its ledger records have expired (a second refund)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from saga import clock
from saga.approvals import format_instant
from saga.errors import (
    ApprovalInvalid,
    AuthorizationDenied,
    CaseRecordRefused,
    DuplicateExecution,
    ReservationNotHeld,
)
from saga.handlers import (
    create_shipment,
    issue_refund,
    record_outcome,
    release_reservation,
    reserve_stock,
    validate_case,
)
from tests.integration.test_tools_handlers import FakeContext, attempt, env, validated
from tests.local_clock import local_clock  # noqa: F401  (fixture)
from tests.tools_harness import BASE_CASE, ToolsEnv, raw_case

__all__ = ["env"]  # the handlers' environment, as test_tools_handlers sets it

FORWARD = (
    ("reserve", reserve_stock, "ReserveStock"),
    ("refund", issue_refund, "IssueRefund"),
    ("ship", create_shipment, "CreateShipment"),
)


EXECUTION = attempt("ValidateCase")["execution"]
OTHER_EXECUTION = "arn:aws:states:us-east-1:1:execution:sm:other"


def forty_days_later_with_the_ledger_expired(
    env: ToolsEnv, move_clock: Callable[[float], None]
) -> None:
    """The clock 40 days on, past the ledger's retention and the provider's key retention, and
    every ledger record deleted: what DynamoDB's TTL deletion does by then."""
    move_clock(40 * 86400)
    for item in env.items("LEDGER_TABLE"):
        env.client.delete_item(
            TableName=env.names["LEDGER_TABLE"], Key={"action_key": item["action_key"]}
        )


def run_saga(case: dict[str, Any], outcome: str = "COMPLETED") -> dict[str, Any]:
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
            "outcome": outcome,
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

    forty_days_later_with_the_ledger_expired(env, local_clock)
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
    forty_days_later_with_the_ledger_expired(env, local_clock)

    with pytest.raises(ReservationNotHeld, match="COMPLETED"):
        release_reservation.handler(
            {"case": case, "attempt": attempt("ReleaseReservation")}, FakeContext()
        )

    assert env.available("SKU-RED-MUG") == stock
    assert [r["status"]["S"] for r in env.reservations("case-shipped")] == ["HELD"]
    assert env.items("LEDGER_TABLE") == []
    record = env.case_record("case-shipped")
    assert record is not None and record["outcome"] == "COMPLETED"


def _iso(seconds: float) -> str:
    return format_instant(datetime.fromtimestamp(seconds, UTC))


def _signed_with_deadline(case_id: str) -> dict[str, Any]:
    """Signed now, to be started within the hour."""
    now = clock.now()
    return sign_locally(
        {**BASE_CASE, "case_id": case_id}, signed_at=_iso(now), start_by=_iso(now + 3600)
    )


def _validate(case: dict[str, Any], execution: str, started: str | None) -> dict[str, Any]:
    at = {**attempt("ValidateCase"), "execution": execution}
    if started is not None:
        at["started"] = started
    result: dict[str, Any] = validate_case.handler({"case": case, "attempt": at}, FakeContext())
    return result


def test_a_late_start_cannot_claim_an_earlier_start_time(
    env: ToolsEnv,
    local_clock: Callable[[float], None],  # noqa: F811
) -> None:
    """The start time in ValidateCase's input is whatever the caller wrote: the deadline is read
    on the saga's own clock, so a direct invoke after the deadline is refused."""
    late = _signed_with_deadline("case-late")
    local_clock(2 * 86400)
    with pytest.raises(ApprovalInvalid, match="has passed"):
        _validate(late, EXECUTION, started=_iso(clock.now() - 2 * 86400 + 60))

    assert env.items("CASES_TABLE") == []


def test_an_accepted_case_validated_again_after_its_deadline_goes_on(
    env: ToolsEnv,
    local_clock: Callable[[float], None],  # noqa: F811
) -> None:
    """A redrive of the owning execution days later still passes ValidateCase, and another
    execution of the same case is a DUPLICATE (design §8), not a refusal."""
    case = _signed_with_deadline("case-ontime")
    local_clock(0)
    first = _validate(case, EXECUTION, started=None)
    assert first["case"]["case_id"] == "case-ontime"

    local_clock(3 * 86400)
    again = _validate(case, EXECUTION, started=None)
    assert again == first
    with pytest.raises(DuplicateExecution, match=f"duplicate of execution {EXECUTION} "):
        _validate(case, OTHER_EXECUTION, started=None)

    record = env.case_record("case-ontime")
    assert record is not None
    assert (record["outcome"], record["execution_arn"]) == ("IN_PROGRESS", EXECUTION)


def test_an_escalated_case_is_never_released_after_its_ledger_expired(
    env: ToolsEnv,
    local_clock: Callable[[float], None],  # noqa: F811
) -> None:
    """An escalation may keep the reserved stock on purpose (the shipment's fate is for a person
    to find out): a replayed release must not hand it back once the ledger has forgotten."""
    case = run_saga(raw_case("case-kept"), outcome="ESCALATED")
    stock = env.available("SKU-RED-MUG")
    forty_days_later_with_the_ledger_expired(env, local_clock)

    with pytest.raises(ReservationNotHeld, match="ESCALATED"):
        release_reservation.handler(
            {"case": case, "attempt": attempt("ReleaseReservation")}, FakeContext()
        )

    assert env.available("SKU-RED-MUG") == stock
    assert [r["status"]["S"] for r in env.reservations("case-kept")] == ["HELD"]


def test_a_shipment_redelivered_after_it_completed_the_case_answers_the_recorded_one(
    env: ToolsEnv,
) -> None:
    """Its answer was lost after the shipment's transaction wrote the case's COMPLETED (a
    retried invoke, a redrive, docs/design.md §3.11): the redelivery finds the case COMPLETED,
    reads the ledger's record and answers it; nothing is sent, nothing written, never refused
    as a case no longer under way."""
    case = validated(raw_case("case-shipped"))
    ship = {"case": case, "attempt": attempt("CreateShipment")}
    first = create_shipment.handler(ship, FakeContext())
    assert (env.case_record("case-shipped") or {})["outcome"] == "COMPLETED"
    ledger_before = env.items("LEDGER_TABLE")

    again = create_shipment.handler(ship, FakeContext())

    assert again == {**first, "replayed": True}
    assert env.shipments("case-shipped") == 1
    assert env.items("LEDGER_TABLE") == ledger_before


def test_only_the_shipment_answers_a_replay_once_it_completed_the_case(env: ToolsEnv) -> None:
    """The reservation's and the refund's records are still there (no retention has passed), but
    the case is COMPLETED: a late delivery of those steps (a task timed out whose function still
    ran, a stray retry) is refused as a case no longer under way, never answered from its record
    as the step that completed the case is (docs/design.md §3.11)."""
    case = validated(raw_case("case-late-steps"))
    for _, module, state in FORWARD:
        module.handler({"case": case, "attempt": attempt(state)}, FakeContext())
    assert (env.case_record("case-late-steps") or {})["outcome"] == "COMPLETED"
    ledger_before = env.items("LEDGER_TABLE")

    for _, module, state in FORWARD[:2]:
        with pytest.raises(AuthorizationDenied, match="not a case under way"):
            module.handler({"case": case, "attempt": attempt(state)}, FakeContext())

    assert env.items("LEDGER_TABLE") == ledger_before
    assert (env.refunds("case-late-steps"), env.shipments("case-late-steps")) == (1, 1)


def test_a_shipment_its_case_record_refuses_is_counted_for_the_alarm(
    env: ToolsEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """A direct invoke under another execution than the case's owner ships (the action is the
    case's), but the case record refuses its COMPLETED: CaseRecordRefused, and the function's
    CaseRecordRefused metric, which the stack alarms on (docs/design.md §3.11)."""
    case = validated(raw_case("case-not-theirs"))
    other = {**attempt("CreateShipment"), "execution": OTHER_EXECUTION}
    capsys.readouterr()

    with pytest.raises(CaseRecordRefused, match=f"belongs to execution {EXECUTION}"):
        create_shipment.handler({"case": case, "attempt": other}, FakeContext())

    metrics = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith('{"_aws"')
    ]
    assert [m.get("CaseRecordRefused") for m in metrics if "CaseRecordRefused" in m] == [[1.0]]
    assert env.shipments("case-not-theirs") == 1
    assert (env.case_record("case-not-theirs") or {})["outcome"] == "IN_PROGRESS"
