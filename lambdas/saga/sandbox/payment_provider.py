"""The sandbox payment provider behind the PaymentProvider port (saga.ports).

`SandboxPaymentsService` (payments.py) is the provider's server side with its Stripe-like
idempotency keys; this is the client side a real provider's adapter would be: it sends the
request with the key and maps the provider's HTTP-like answer to a receipt or exactly one port
error, with the faults of one case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from saga import clock as saga_clock
from saga.clock import Clock
from saga.ports import (
    DownstreamConflict,
    DownstreamKeyMismatch,
    DownstreamRejected,
    DownstreamTimeout,
)
from saga.ports.payments import RefundReceipt, RefundRequest
from saga.sandbox.faults import SandboxAdapter
from saga.sandbox.payment_keys import DOWNSTREAM, PAYMENT_KEY_RETENTION_SECONDS, ProviderResponse
from saga.sandbox.payments import SandboxPaymentsService

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class SandboxPaymentProvider(SandboxAdapter[SandboxPaymentsService]):
    """The PaymentProvider port over the sandbox provider, with the faults of one case."""

    DOWNSTREAM = DOWNSTREAM
    NAME = "payment provider"

    @classmethod
    def create(
        cls,
        client: DynamoDBClient,
        *,
        payments_table: str,
        sandbox_table: str,
        case_id: str,
        faults: Sequence[str] = (),
        key_retention_seconds: int = PAYMENT_KEY_RETENTION_SECONDS,
        clock: Clock = saga_clock.now,
    ) -> SandboxPaymentProvider:
        """Explicit construction (tests, tools that already hold a client)."""
        service = SandboxPaymentsService(
            client,
            payments_table=payments_table,
            sandbox_table=sandbox_table,
            key_retention_seconds=key_retention_seconds,
            clock=clock,
        )
        return cls.of_case(service, case_id=case_id, faults=faults)

    @property
    def idempotency_window_seconds(self) -> float:
        return float(self._service.key_retention_seconds)

    def refund(self, request: RefundRequest, *, idempotency_key: str) -> RefundReceipt:
        response = self._service.create_refund(
            idempotency_key=idempotency_key,
            case_id=request.case_id,
            business_ref=request.business_ref,
            payment_reference=request.payment_reference,
            amount_minor=request.amount_minor,
            currency=request.currency,
            faults=self._faults,
        )
        return _receipt_or_raise(response)

    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        return [
            _receipt(found["refund_id"], found)
            for found in self._service.list_refunds(business_ref, faults=self._faults)
        ]


def _receipt(refund_id: Any, refund: Mapping[str, Any]) -> RefundReceipt:
    """A receipt from a refund body (`id`) or a reference-index entry (`refund_id`)."""
    return RefundReceipt(
        refund_id=str(refund_id),
        business_ref=str(refund["business_ref"]),
        amount_minor=int(refund["amount_minor"]),
        currency=str(refund["currency"]),
        status=str(refund["status"]),
    )


def _receipt_or_raise(response: ProviderResponse) -> RefundReceipt:
    """Map the provider's HTTP-like answer to a receipt or exactly one adapter error."""
    body = response.body
    if response.ok:
        return _receipt(body["id"], body)
    error = body.get("error", {})
    code = str(error.get("code", ""))
    message = str(error.get("message", f"HTTP {response.status}"))
    if response.status == 409:
        raise DownstreamConflict(message, downstream=DOWNSTREAM)
    if code == "idempotency_key_mismatch":
        raise DownstreamKeyMismatch(message, downstream=DOWNSTREAM)
    if 400 <= response.status < 500:
        raise DownstreamRejected(message, downstream=DOWNSTREAM)
    # A (possibly replayed) server error: the provider itself could not say what happened.
    raise DownstreamTimeout(f"server error {response.status}: {message}", downstream=DOWNSTREAM)
