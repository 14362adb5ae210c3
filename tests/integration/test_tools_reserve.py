"""ReserveStock against moto: one transaction, stock taken once, every fault and error path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_aws.tables import StackTables
from saga.errors import KeyConflict, OutcomeUnknown, OutOfStock, TransientError
from saga.identity import Operation
from saga.ledger import Absent, Found, LedgerStatus, Undeterminable
from saga.models import Case
from saga.sandbox.inventory import SandboxInventory
from saga.tools.reserve import reconcile_reserve, reserve_stock
from tests.tools_harness import Delivery, ListFaults, ToolsEnv, make_case, tools_env

KEY = "acme#reserve#case-0001.reserve"


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def reserve(env: ToolsEnv, case: Case, delivery: Delivery, faults: object = None):  # type: ignore[no-untyped-def]
    return reserve_stock(
        case,
        delivery.next(),
        execution_arn="arn:exec",
        ledger=env.ledger,
        inventory=SandboxInventory.for_case(
            env.inventory,
            faults if faults is not None else env.faults(case, "reserve"),  # type: ignore[arg-type]
            case,
            Operation.RESERVE,
        ),
    )


def test_reserve_takes_stock_once_and_replays(env: ToolsEnv) -> None:
    case = make_case(reserve={"sku": "SKU-RED-MUG", "quantity": 3})
    delivery = Delivery("ReserveStock", case.case_id)
    first = reserve(env, case, delivery)
    second = reserve(env, case, delivery)
    assert first.status == "COMPLETED" and not first.replayed
    assert first.result == {"reservation_id": KEY, "sku": "SKU-RED-MUG", "quantity": 3}
    assert second.replayed and second.result == first.result
    assert env.available("SKU-RED-MUG") == 97
    [reservation] = env.reservations(case.case_id)
    assert reservation["status"]["S"] == "HELD" and reservation["reservation_id"]["S"] == KEY


def test_out_of_stock_is_recorded_and_replayed_without_touching_stock(env: ToolsEnv) -> None:
    case = make_case(reserve={"sku": "SKU-BLUE-MUG", "quantity": 6})
    delivery = Delivery("ReserveStock", case.case_id)
    with pytest.raises(OutOfStock, match="SKU SKU-BLUE-MUG: 5 available, 6 requested"):
        reserve(env, case, delivery)
    with pytest.raises(OutOfStock, match="5 available, 6 requested"):
        reserve(env, case, delivery)
    assert env.available("SKU-BLUE-MUG") == 5
    assert env.reservations(case.case_id) == []
    record = env.record(KEY)
    assert record is not None and record.status is LedgerStatus.FAILED


def test_unknown_sku_is_out_of_stock(env: ToolsEnv) -> None:
    case = make_case(reserve={"sku": "SKU-NOPE", "quantity": 1})
    with pytest.raises(OutOfStock, match="SKU SKU-NOPE is not stocked"):
        reserve(env, case, Delivery("ReserveStock", case.case_id))


def test_changed_parameters_under_the_same_key_are_a_conflict(env: ToolsEnv) -> None:
    delivery = Delivery("ReserveStock", "case-0001")
    reserve(env, make_case(), delivery)
    with pytest.raises(KeyConflict):
        reserve(env, make_case(reserve={"sku": "SKU-RED-MUG", "quantity": 2}), delivery)
    assert env.available("SKU-RED-MUG") == 99


def test_fail_before_commit_and_timeout_write_nothing(env: ToolsEnv) -> None:
    case = make_case(faults={"reserve": ["fail_before_commit", "timeout"]})
    delivery = Delivery("ReserveStock", case.case_id)
    with pytest.raises(TransientError, match="before commit"):
        reserve(env, case, delivery)
    with pytest.raises(OutcomeUnknown, match="timeout"):
        reserve(env, case, delivery)
    assert env.available("SKU-RED-MUG") == 100
    assert env.record(KEY) is None
    # the reconcile lookup proves nothing happened; the next delivery reserves once
    assert isinstance(reconcile_reserve(case, inventory=env.inventory), Absent)
    assert reserve(env, case, delivery).attempts == 1
    assert env.available("SKU-RED-MUG") == 99


def test_lose_response_commits_then_reconcile_finds_it(env: ToolsEnv) -> None:
    case = make_case(faults={"reserve": ["lose_response"]})
    delivery = Delivery("ReserveStock", case.case_id)
    with pytest.raises(OutcomeUnknown, match="lost"):
        reserve(env, case, delivery)
    assert env.available("SKU-RED-MUG") == 99
    found = reconcile_reserve(case, inventory=env.inventory)
    assert isinstance(found, Found) and found.downstream_ref == KEY
    assert reserve(env, case, delivery).replayed
    assert env.available("SKU-RED-MUG") == 99


def test_reject_fault_is_a_recorded_out_of_stock(env: ToolsEnv) -> None:
    case = make_case(faults={"reserve": ["reject"]})
    delivery = Delivery("ReserveStock", case.case_id)
    with pytest.raises(OutOfStock, match="sandbox fault: reject"):
        reserve(env, case, delivery)
    with pytest.raises(OutOfStock, match="sandbox fault: reject"):
        reserve(env, case, delivery)  # replayed from the ledger, faults exhausted
    assert env.available("SKU-RED-MUG") == 100


def test_reject_after_an_earlier_commit_returns_the_reservation(env: ToolsEnv) -> None:
    case = make_case()
    delivery = Delivery("ReserveStock", case.case_id)
    reserve(env, case, delivery)
    replay = reserve(env, case, delivery, faults=ListFaults("reject"))
    assert replay.replayed and env.available("SKU-RED-MUG") == 99


def test_unavailable_stays_unavailable_and_lookup_cannot_tell(env: ToolsEnv) -> None:
    case = make_case(faults={"reserve": ["unavailable"]})
    delivery = Delivery("ReserveStock", case.case_id)
    for _ in range(2):
        with pytest.raises(OutcomeUnknown, match="unavailable"):
            reserve(env, case, delivery)
    answer = reconcile_reserve(
        case,
        inventory=SandboxInventory.for_case(
            env.inventory, env.faults(case, "reserve"), case, Operation.RESERVE
        ),
    )
    assert isinstance(answer, Undeterminable)
    assert env.available("SKU-RED-MUG") == 100
