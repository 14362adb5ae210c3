"""Interleavings that only the safety conditions themselves stop (each test kills a mutant that
the rest of the suite lets through): the release's `status = HELD` condition, and the refund's
idempotency key being the same on every delivery."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga.errors import OutcomeUnknown
from saga.identity import Operation, action_request
from saga.inventory import InventoryTables
from saga.ledger import Attempt, LedgerStatus
from saga.models import Case
from saga.ports.inventory import Reservation
from saga.ports.payments import RefundReceipt
from saga.sandbox.calls import read_references
from saga.sandbox.payment_provider import SandboxPaymentProvider
from saga.tools.reconcile import reconcile_action
from saga.tools.refund import reconcile_refund
from saga.tools.release import release_reservation
from tests.tools_harness import Delivery, ToolsEnv, make_case, tools_env

QUANTITY = 4


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables, attempt_budget=8) as tools:
        yield tools


def release(env: ToolsEnv, case: Case, attempt: Attempt, tables: InventoryTables) -> Any:
    return release_reservation(
        case,
        attempt,
        execution_arn="arn:e",
        ledger=env.ledger,
        inventory=tables,
        cases=env.cases,
    )


def test_two_racing_releases_restore_the_stock_once(env: ToolsEnv) -> None:
    """A reads the reservation HELD and stalls past its lease; B takes over, reconciles (not
    released), releases. A wakes up and writes: only the `status = HELD` condition of the release
    transaction stops A from giving the stock back a second time."""
    case = make_case(reserve={"sku": "SKU-RED-MUG", "quantity": QUANTITY})
    env.reserve(case)
    assert env.available("SKU-RED-MUG") == 100 - QUANTITY
    a_has_read = threading.Event()
    a_may_write = threading.Event()
    a_outcome: list[BaseException | Any] = []

    class StallingTables(InventoryTables):
        """A's view of the inventory: it stalls right after reading the reservation."""

        def find_reservation(self, reservation_id: str) -> Reservation | None:
            found = super().find_reservation(reservation_id)
            if not a_has_read.is_set():
                a_has_read.set()
                a_may_write.wait(10)
            return found

    stalling = StallingTables(
        env.client, env.names["INVENTORY_TABLE"], env.names["RESERVATIONS_TABLE"], clock=env.clock
    )
    deliveries = Delivery("ReleaseReservation", case.case_id, remaining_seconds=25)

    def delivery_a() -> None:
        try:
            a_outcome.append(release(env, case, deliveries.next(), stalling))
        except BaseException as exc:
            a_outcome.append(exc)

    thread = threading.Thread(target=delivery_a)
    thread.start()
    assert a_has_read.wait(10)
    env.clock.advance(env.policy.lease_seconds(25) + 1)  # A's lease runs out while it stalls
    done = release(env, case, deliveries.next(), env.inventory)
    assert done.result["status"] == "RELEASED"
    assert env.available("SKU-RED-MUG") == 100

    a_may_write.set()
    thread.join(10)
    assert env.available("SKU-RED-MUG") == 100, "the stock was given back twice"
    assert len(a_outcome) == 1 and isinstance(a_outcome[0], OutcomeUnknown)
    assert "lease lost" in str(a_outcome[0])
    record = env.record(action_request(case, Operation.RELEASE).key)
    assert record is not None and record.status is LedgerStatus.COMPLETED


class LaggingLookup:
    """The sandbox provider, but its lookup lags its writes: it cannot see a request still in
    flight and does not move it along (a provider's search a few seconds behind)."""

    def __init__(self, provider: SandboxPaymentProvider, env: ToolsEnv) -> None:
        self._provider = provider
        self._env = env
        self.idempotency_window_seconds = provider.idempotency_window_seconds

    def refund(self, request: Any, *, idempotency_key: str) -> RefundReceipt:
        return self._provider.refund(request, idempotency_key=idempotency_key)

    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        found = read_references(
            self._env.client, self._env.names["SANDBOX_TABLE"], "refunds", business_ref
        )
        return [
            RefundReceipt(
                str(f["refund_id"]),
                str(f["business_ref"]),
                int(f["amount_minor"]),
                str(f["currency"]),
                str(f["status"]),
            )
            for f in found
        ]


def test_a_refund_re_sent_while_the_first_is_in_flight_is_one_refund(env: ToolsEnv) -> None:
    """d1 gets no answer while the provider keeps processing it; the lookup does not see it yet,
    so d2 re-sends (inside the key retention) and the provider answers 409 "in progress"; the
    request in flight then commits. Because every delivery sends the same idempotency key, the
    provider deduplicates: exactly one refund, whatever the provider finishes later."""
    case = make_case(faults={"refund": ["in_flight"]})
    provider = LaggingLookup(env.provider(case), env)
    reference = action_request(case, Operation.REFUND).reference
    deliveries = Delivery("IssueRefund", case.case_id)

    def deliver() -> Any:
        return env.issue_refund(case, deliveries.next(), provider=provider)

    def reconcile() -> Any:
        return reconcile_action(
            case,
            "refund",
            Attempt(f"reconcile-{deliveries.count}", 25),
            execution_arn="arn:e",
            ledger=env.ledger,
            reconcile=lambda: reconcile_refund(reference, provider),
            reattempt_window_seconds=provider.idempotency_window_seconds,
        )

    with pytest.raises(OutcomeUnknown, match="in_flight"):
        deliver()
    assert reconcile().decision == "RETRY"  # nothing visible yet, inside the key retention
    with pytest.raises(OutcomeUnknown, match="another in-progress request"):
        deliver()  # 409: the first request is still being processed (and now commits)
    answer = reconcile()
    assert answer.decision == "RESUME" and answer.result is not None
    assert env.refunds(case.case_id) == 1

    # Whatever the provider still had to process is finished by now (a day later).
    env.clock.advance(25 * 3600)
    env.provider(case).find_refunds(reference)
    assert env.refunds(case.case_id) == 1
