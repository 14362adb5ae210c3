"""Refund and shipment tools with fake adapters: every adapter error maps to one saga error,
and every lookup answer maps to one reconciliation (the ledger itself is moto-backed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from local_aws.tables import StackTables
from saga.errors import (
    OutcomeUnknown,
    RefundRejected,
    SagaError,
    ShipmentRejected,
    TransientError,
)
from saga.ledger import Absent, Found, LedgerStatus, Undeterminable
from saga.ports import (
    DownstreamConflict,
    DownstreamError,
    DownstreamKeyMismatch,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.ports.carrier import ShipmentReceipt, ShipmentRequest
from saga.ports.payments import RefundReceipt, RefundRequest
from saga.tools.refund import reconcile_refund
from saga.tools.ship import reconcile_shipment
from tests.tools_harness import Delivery, ToolsEnv, make_case, tools_env


@dataclass
class FakeProvider:
    """A PaymentProvider: raises the scripted errors, then refunds (one receipt per key)."""

    errors: list[DownstreamError] = field(default_factory=list)
    lookup: list[RefundReceipt] | DownstreamError = field(default_factory=list)
    calls: list[tuple[RefundRequest, str]] = field(default_factory=list)
    idempotency_window_seconds: float = 86400.0

    def refund(self, request: RefundRequest, *, idempotency_key: str) -> RefundReceipt:
        self.calls.append((request, idempotency_key))
        if self.errors:
            raise self.errors.pop(0)
        return RefundReceipt(
            "re_1", request.business_ref, request.amount_minor, request.currency, "succeeded"
        )

    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        if isinstance(self.lookup, DownstreamError):
            raise self.lookup
        return list(self.lookup)


@dataclass
class FakeCarrier:
    errors: list[DownstreamError] = field(default_factory=list)
    lookup: list[ShipmentReceipt] | DownstreamError = field(default_factory=list)
    calls: list[ShipmentRequest] = field(default_factory=list)

    def create_shipment(self, request: ShipmentRequest) -> ShipmentReceipt:
        self.calls.append(request)
        if self.errors:
            raise self.errors.pop(0)
        return ShipmentReceipt(f"shp_{len(self.calls)}", request.business_ref, "created")

    def find_shipments(self, business_ref: str) -> list[ShipmentReceipt]:
        if isinstance(self.lookup, DownstreamError):
            raise self.lookup
        return list(self.lookup)


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def test_refund_sends_the_action_key_as_idempotency_key_and_action_id_as_reference(
    env: ToolsEnv,
) -> None:
    provider = FakeProvider()
    case = make_case()
    result = env.issue_refund(case, provider=provider)
    [(request, key)] = provider.calls
    assert key == "acme#refund#case-0001.refund"
    assert request == RefundRequest("case-0001", "case-0001.refund", "pay-777", 2000, "USD")
    assert result.downstream_ref == "re_1" and result.result["refund_id"] == "re_1"


@pytest.mark.parametrize(
    ("error", "expected", "status"),
    [
        (DownstreamRejected("card closed"), RefundRejected, LedgerStatus.FAILED),
        (DownstreamNotDispatched("throttled"), TransientError, LedgerStatus.IN_PROGRESS),
        # "in progress": the request in flight may still commit, never "nothing happened"
        (DownstreamConflict("key in use"), OutcomeUnknown, LedgerStatus.UNKNOWN),
        (DownstreamTimeout("read timeout"), OutcomeUnknown, LedgerStatus.UNKNOWN),
        (DownstreamUnavailable("down"), OutcomeUnknown, LedgerStatus.UNKNOWN),
        (DownstreamKeyMismatch("other params"), OutcomeUnknown, LedgerStatus.UNKNOWN),
    ],
)
def test_refund_error_mapping(
    env: ToolsEnv, error: DownstreamError, expected: type[SagaError], status: LedgerStatus
) -> None:
    case = make_case()
    with pytest.raises(expected):
        env.issue_refund(case, provider=FakeProvider(errors=[error]))
    record = env.record("acme#refund#case-0001.refund")
    assert record is not None and record.status is status
    if expected is RefundRejected:
        assert record.error is not None
        assert record.error == {"type": "RefundRejected", "message": record.error["message"]}
        assert "card closed" in record.error["message"]


@pytest.mark.parametrize(
    ("error", "expected", "status"),
    [
        (DownstreamRejected("no such street"), ShipmentRejected, LedgerStatus.FAILED),
        (DownstreamNotDispatched("throttled"), TransientError, LedgerStatus.IN_PROGRESS),
        (DownstreamTimeout("read timeout"), OutcomeUnknown, LedgerStatus.UNKNOWN),
        (DownstreamUnavailable("down"), OutcomeUnknown, LedgerStatus.UNKNOWN),
    ],
)
def test_shipment_error_mapping(
    env: ToolsEnv, error: DownstreamError, expected: type[SagaError], status: LedgerStatus
) -> None:
    case = make_case()
    with pytest.raises(expected):
        env.create_shipment(case, carrier=FakeCarrier(errors=[error]))
    record = env.record("acme#ship#case-0001.ship")
    assert record is not None and record.status is status


def test_shipment_request_carries_the_action_id_address_and_item(env: ToolsEnv) -> None:
    carrier = FakeCarrier()
    case = make_case()
    env.create_shipment(case, carrier=carrier)
    [request] = carrier.calls
    assert request.business_ref == "case-0001.ship"
    assert request.address["city"] == "Springfield"
    assert (request.sku, request.quantity) == ("SKU-RED-MUG", 1)


def receipt(n: int) -> RefundReceipt:
    return RefundReceipt(f"re_{n}", "case-0001.refund", 2000, "USD", "succeeded")


def test_refund_lookup_answers() -> None:
    assert isinstance(reconcile_refund("r", FakeProvider(lookup=[])), Absent)
    found = reconcile_refund("r", FakeProvider(lookup=[receipt(1)]))
    assert isinstance(found, Found) and found.downstream_ref == "re_1"
    duplicate = reconcile_refund("r", FakeProvider(lookup=[receipt(1), receipt(2)]))
    assert isinstance(duplicate, Undeterminable) and "duplicate refunds" in duplicate.reason
    down = reconcile_refund("r", FakeProvider(lookup=DownstreamUnavailable("down")))
    assert isinstance(down, Undeterminable) and "no answer" in down.reason


def test_shipment_lookup_answers() -> None:
    ship = ShipmentReceipt("shp_1", "case-0001.ship", "created")
    assert isinstance(reconcile_shipment("r", FakeCarrier(lookup=[])), Absent)
    found = reconcile_shipment("r", FakeCarrier(lookup=[ship]))
    assert isinstance(found, Found) and found.result["shipment_id"] == "shp_1"
    two = reconcile_shipment("r", FakeCarrier(lookup=[ship, ship]))
    assert isinstance(two, Undeterminable) and "duplicate shipments" in two.reason
    timeout = reconcile_shipment("r", FakeCarrier(lookup=DownstreamTimeout("slow")))
    assert isinstance(timeout, Undeterminable)


def test_takeover_after_timeout_looks_up_before_sending_again(env: ToolsEnv) -> None:
    """A carrier without idempotency: the uncertain first call is found, never re-sent."""
    case = make_case()
    delivery = Delivery("CreateShipment", case.case_id)
    carrier = FakeCarrier(errors=[DownstreamTimeout("lost")])
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case, delivery.next(), carrier=carrier)
    carrier.lookup = [ShipmentReceipt("shp_1", "case-0001.ship", "created")]
    result = env.create_shipment(case, delivery.next(), carrier=carrier)
    assert result.reconciled and result.downstream_ref == "shp_1"
    assert len(carrier.calls) == 1
