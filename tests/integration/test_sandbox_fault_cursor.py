"""FaultInjector against moto DynamoDB: one shared, atomic cursor per case and downstream."""

from __future__ import annotations

import threading
from typing import Any

from saga.sandbox.faults import FaultInjector, cursor_key
from tests.tables import SandboxTables

TABLES = SandboxTables()


def injector(
    sandbox_client: Any, faults: list[str], case_id: str = "case-1", downstream: str = "refund"
) -> FaultInjector:
    return FaultInjector(
        sandbox_client, TABLES.sandbox, case_id, downstream, faults, clock=lambda: 1000
    )


def cursor_item(sandbox_client: Any, case_id: str, downstream: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = sandbox_client.get_item(
        TableName=TABLES.sandbox,
        Key={"pk": {"S": cursor_key(case_id, downstream)}},
        ConsistentRead=True,
    ).get("Item")
    return item


def test_entries_come_in_order_then_none(sandbox_client: Any) -> None:
    faults = injector(sandbox_client, ["timeout", "lose_response", "reject"])

    assert [faults.next() for _ in range(5)] == ["timeout", "lose_response", "reject", None, None]
    item = cursor_item(sandbox_client, "case-1", "refund")
    assert item is not None
    assert item["cursor"] == {"N": "5"}
    assert item["case_id"] == {"S": "case-1"}


def test_the_cursor_is_shared_by_every_injector_of_the_case(sandbox_client: Any) -> None:
    # Each Lambda invocation builds its own injector; they must draw from one sequence.
    plan = ["fail_before_commit", "timeout", "reject"]

    drawn = [injector(sandbox_client, plan).next() for _ in range(4)]

    assert drawn == ["fail_before_commit", "timeout", "reject", None]


def test_cases_and_downstreams_have_separate_cursors(sandbox_client: Any) -> None:
    assert injector(sandbox_client, ["timeout"], "case-1", "refund").next() == "timeout"
    assert injector(sandbox_client, ["timeout"], "case-2", "refund").next() == "timeout"
    assert injector(sandbox_client, ["reject"], "case-1", "shipment").next() == "reject"
    assert injector(sandbox_client, ["timeout"], "case-1", "refund").next() is None


def test_unavailable_is_sticky_and_flagged(sandbox_client: Any) -> None:
    faults = injector(sandbox_client, ["timeout", "unavailable", "reject"])

    drawn = [faults.next() for _ in range(5)]

    assert drawn == ["timeout", "unavailable", "unavailable", "unavailable", "unavailable"]
    item = cursor_item(sandbox_client, "case-1", "refund")
    assert item is not None
    assert item["unavailable"] == {"BOOL": True}


def test_an_empty_list_makes_no_request_at_all(sandbox_client: Any) -> None:
    class NoCalls:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"unexpected DynamoDB call {name}")

    faults = FaultInjector(NoCalls(), TABLES.sandbox, "case-1", "refund", [])  # type: ignore[arg-type]

    assert [faults.next() for _ in range(3)] == [None, None, None]
    assert cursor_item(sandbox_client, "case-1", "refund") is None


def test_concurrent_calls_each_get_a_distinct_entry(sandbox_client: Any) -> None:
    lock = threading.Lock()

    class Serialised:  # DynamoDB makes each UpdateItem atomic; moto needs help
        def __getattr__(self, name: str) -> Any:
            method = getattr(sandbox_client, name)

            def call(**kwargs: Any) -> Any:
                with lock:
                    return method(**kwargs)

            return call

    plan = ["timeout", "reject", "lose_response", "fail_before_commit"]
    drawn: list[str | None] = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        faults = FaultInjector(Serialised(), TABLES.sandbox, "case-1", "shipment", plan)  # type: ignore[arg-type]
        barrier.wait()
        drawn.append(faults.next())

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(d or "" for d in drawn) == sorted([*plan, "", ""])
