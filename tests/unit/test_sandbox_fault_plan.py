"""FaultInjector and fault-plan validation without AWS (an in-memory counter stands in)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.fault_plan import DOWNSTREAMS, FAULT_NAMES, validate_fault_plan, validate_faults
from saga.sandbox.faults import FaultInjector


class CounterClient:
    """Just enough of UpdateItem for the cursor: ADD returns the new value."""

    def __init__(self) -> None:
        self.cursors: dict[str, int] = {}
        self.flags: dict[str, bool] = {}
        self.calls: list[str] = []

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        pk = kwargs["Key"]["pk"]["S"]
        self.calls.append(pk)
        if "ADD" in kwargs["UpdateExpression"]:
            self.cursors[pk] = self.cursors.get(pk, 0) + 1
            return {"Attributes": {"cursor": {"N": str(self.cursors[pk])}}}
        self.flags[pk] = True
        return {}


def make(client: CounterClient, faults: list[str], downstream: str = "refund") -> FaultInjector:
    return FaultInjector(client, "sandbox", "case-1", downstream, faults)  # type: ignore[arg-type]


def test_names_are_the_contract() -> None:
    assert FAULT_NAMES == (
        "fail_before_commit",
        "lose_response",
        "reject",
        "timeout",
        "unavailable",
        "in_flight",
    )
    assert DOWNSTREAMS == ("reserve", "refund", "shipment", "release")


@pytest.mark.parametrize("downstream", ["reserve", "shipment", "release"])
def test_in_flight_belongs_to_the_payment_provider_only(downstream: str) -> None:
    with pytest.raises(ValueError, match=rf"sandbox.faults.{downstream}\[1\]: 'in_flight' is a"):
        validate_fault_plan({downstream: ["timeout", "in_flight"]})
    assert validate_fault_plan({"refund": ["in_flight"]}) == {"refund": ("in_flight",)}


def test_one_entry_per_call_in_order_then_none() -> None:
    client = CounterClient()
    faults = make(client, ["reject", "timeout"])

    assert [faults.next() for _ in range(4)] == ["reject", "timeout", None, None]
    assert client.cursors == {"faults#case-1#refund": 4}


def test_unavailable_is_sticky_from_the_call_that_consumes_it() -> None:
    client = CounterClient()
    faults = make(client, ["lose_response", "unavailable", "reject"])

    assert [faults.next() for _ in range(5)] == [
        "lose_response",
        "unavailable",
        "unavailable",
        "unavailable",
        "unavailable",
    ]
    assert client.flags == {"faults#case-1#refund": True}


def test_no_faults_means_no_request() -> None:
    client = CounterClient()
    faults = make(client, [])

    assert faults.next() is None
    assert client.calls == []


@pytest.mark.parametrize(
    ("downstream", "faults", "message"),
    [
        ("refund", ["timeout", "explode"], r"sandbox.faults.refund\[1\]: unknown fault 'explode'"),
        ("payments", ["timeout"], "unknown downstream 'payments'"),
        ("refund", "timeout", "must be a list"),
    ],
)
def test_bad_fault_lists_are_refused_with_the_field_named(
    downstream: str, faults: Any, message: str
) -> None:
    client = CounterClient()
    with pytest.raises(ValueError, match=message):
        make(client, faults, downstream)
    with pytest.raises(ValueError, match=message):
        validate_faults(downstream, faults)
    assert client.calls == []


def test_a_whole_plan_is_validated() -> None:
    plan = {"refund": ["lose_response"], "shipment": [], "release": ["unavailable"]}
    assert validate_fault_plan(plan) == {
        "refund": ("lose_response",),
        "shipment": (),
        "release": ("unavailable",),
    }
    with pytest.raises(ValueError, match=r"sandbox.faults.release\[0\]"):
        validate_fault_plan({"refund": [], "release": ["boom"]})


def test_a_case_id_is_required() -> None:
    with pytest.raises(ValueError, match="case_id"):
        FaultInjector(CounterClient(), "sandbox", "", "refund", ["timeout"])  # type: ignore[arg-type]
