"""Test doubles for the ledger tests: a clock, a counting downstream, fault hooks for botocore.

The downstream is a real counted effect (a list of committed refunds behind a lock), never a mock
of the ledger: "exactly one effect" in a test means one entry in `CountingDownstream.effects`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ReadTimeoutError
from moto.core.models import botocore_stubber
from moto.dynamodb.responses import DynamoHandler

from saga.errors import OutcomeUnknown, TransientError
from saga.identity import Operation, action_id_for, request_digest
from saga.ledger import (
    Absent,
    ActionRequest,
    EffectResult,
    Found,
    LedgerRecord,
    Reconciliation,
    Undeterminable,
)

START = 1_700_000_000.0


class FakeClock:
    """Injectable clock: tests jump past leases and retention without sleeping."""

    def __init__(self, now: float = START) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@dataclass
class CountingDownstream:
    """A payment provider without idempotency: every `refund` call that commits is an effect."""

    effects: list[dict[str, Any]] = field(default_factory=list)
    lookups: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refund(self, business_ref: str, amount_minor: int) -> EffectResult:
        with self._lock:
            refund_id = f"rf-{len(self.effects) + 1}"
            result = {"refund_id": refund_id, "business_ref": business_ref, "amount": amount_minor}
            self.effects.append(result)
        return EffectResult(dict(result), refund_id)

    def effects_for(self, business_ref: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self.effects if e["business_ref"] == business_ref]

    def find(self, business_ref: str) -> Reconciliation:
        with self._lock:
            self.lookups += 1
        found = self.effects_for(business_ref)
        if not found:
            return Absent()
        return Found(found[0], found[0]["refund_id"])

    # effects with the failure modes the ledger has to survive
    def effect(self, business_ref: str, amount_minor: int = 2000) -> Callable[[], EffectResult]:
        return lambda: self.refund(business_ref, amount_minor)

    def lose_response(self, business_ref: str, amount_minor: int = 2000) -> Callable[[], Any]:
        def effect() -> EffectResult:
            self.refund(business_ref, amount_minor)
            raise OutcomeUnknown("refund call timed out after sending")

        return effect

    def not_dispatched(self) -> Callable[[], EffectResult]:
        def effect() -> EffectResult:
            raise TransientError("provider unavailable before commit")

        return effect

    def lookup(self, business_ref: str) -> Callable[[], Reconciliation]:
        return lambda: self.find(business_ref)

    def cannot_tell(self) -> Callable[[], Reconciliation]:
        def lookup() -> Reconciliation:
            with self._lock:
                self.lookups += 1
            return Undeterminable("provider lookup unavailable")

        return lookup


@dataclass
class RecordingObserver:
    """Collects ledger decisions so tests can assert which row of the table was taken."""

    decisions: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_decision(self, name: str, request: ActionRequest, record: LedgerRecord | None) -> None:
        with self._lock:
            self.decisions.append(name)


def refund_request(
    case_id: str = "case-0001",
    amount_minor: int = 2000,
    revision: int = 1,
    tenant_id: str = "acme",
) -> ActionRequest:
    """An approved refund action with its identity derived from the case (docs/design.md §2)."""
    parameters = {"payment_reference": "pay-777", "amount_minor": amount_minor, "currency": "USD"}
    return ActionRequest(
        tenant_id=tenant_id,
        operation=Operation.REFUND.value,
        action_id=action_id_for(case_id, Operation.REFUND),
        digest=request_digest(parameters, revision),
        case_id=case_id,
        execution_arn=f"arn:aws:states:us-east-1:123456789012:execution:saga:{case_id}",
    )


@contextmanager
def atomic_dynamodb_requests() -> Iterator[None]:
    """Serialise moto's DynamoDB requests: DynamoDB makes each single-item write atomic, moto
    does not (docs/design.md §7), so a concurrency test without this would test moto's races."""
    lock = threading.Lock()
    original = DynamoHandler.call_action

    def call_action(self: DynamoHandler) -> Any:
        with lock:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoHandler.call_action = original  # type: ignore[method-assign]


@contextmanager
def lose_responses(client: Any, operation: str, times: int = 1) -> Iterator[list[int]]:
    """The next `times` calls of `operation` reach moto and commit, then the response is lost
    (a ReadTimeoutError), so botocore's standard retry mode sends the same request again.

    The retry itself is botocore's; only its backoff sleep is skipped (delay 0) for the losses
    injected here, to keep the tests fast.
    """
    lost = [0]
    retry_due = [False]

    def before_send(request: Any, **kwargs: Any) -> Any:
        if lost[0] >= times:
            return None
        response = botocore_stubber(event_name=f"before-send.dynamodb.{operation}", request=request)
        if response is None:
            return None
        lost[0] += 1
        retry_due[0] = True
        raise ReadTimeoutError(endpoint_url=request.url)

    def needs_retry(**kwargs: Any) -> int | None:
        if retry_due[0]:
            retry_due[0] = False
            return 0
        return None

    send_event = f"before-send.dynamodb.{operation}"
    retry_event = f"needs-retry.dynamodb.{operation}"
    client.meta.events.register(send_event, before_send)
    client.meta.events.register(retry_event, needs_retry)
    try:
        yield lost
    finally:
        client.meta.events.unregister(send_event, before_send)
        client.meta.events.unregister(retry_event, needs_retry)
