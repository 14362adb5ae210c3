"""The payment-provider interface the refund tool codes against, and its sandbox implementation.

The tool passes the action key as the provider's idempotency key, so a repeat of the same refund
(a retry, a redrive, a takeover) is one refund at the provider for as long as the provider keeps
the key (24 h at Stripe). After that only the business reference protects the action: the tool
reconciles with `find_refunds(business_ref)` instead of sending again. That lookup must be
read-after-write consistent, or raise to say it cannot tell (see `PaymentProvider`).

A real provider plugs in behind the same Protocol. Sketch for Stripe (no network code here):

    class StripePaymentProvider:
        def __init__(self, api_key: str, timeout_seconds: float, payment_reference: str) -> None:
            # One HTTP client, zero automatic retries (a repeat is the ledger's and the
            # workflow's decision, never the SDK's), explicit connect and read timeouts that fit
            # inside the Lambda timeout. Built per case (Runtime.payment_provider(case)), with
            # the case's refund.payment_reference: the payment whose refunds find_refunds lists.
            ...

        def refund(self, request, *, idempotency_key):
            # POST /v1/refunds  charge/payment_intent=request.payment_reference,
            #   amount=request.amount_minor, metadata[business_ref]=request.business_ref,
            #   metadata[case_id]=request.case_id
            #   header Idempotency-Key: idempotency_key  (the action key)
            # 200 -> RefundReceipt(refund.id, ...)
            # 402 / card_error / invalid_request_error -> DownstreamRejected(message)
            # 400 idempotency_error (key reused with other parameters) -> DownstreamKeyMismatch
            # 409 idempotency key in use (concurrent request) -> DownstreamConflict
            # 429, or no connection before the request was sent -> DownstreamNotDispatched
            # read timeout, connection reset after sending, 5xx -> DownstreamTimeout
            # DNS failure / provider outage with no response -> DownstreamUnavailable
            ...

        def find_refunds(self, business_ref):
            # GET /v1/refunds?payment_intent=<payment_reference>&limit=100 (charge=<id> for a
            # charge), then starting_after=<last id> while has_more: a list call, which Stripe
            # serves read-after-write consistent. Keep the refunds whose
            # metadata['business_ref'] == business_ref.
            # Not Stripe's search API: it does not cover refunds (charges, customers, invoices,
            # payment intents, prices, products, subscriptions only) and lags writes by up to a
            # minute, longer in an outage, so a refund whose response was just lost could be
            # missing from it.
            # A timeout, an error or a page not read -> raise DownstreamUnavailable ("cannot
            # tell"); [] only after every page was read.
            ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from saga import clock as saga_clock
from saga.adapters.errors import (
    DownstreamConflict,
    DownstreamKeyMismatch,
    DownstreamRejected,
    DownstreamTimeout,
)
from saga.sandbox.faults import Clock, FaultInjector
from saga.sandbox.payments import (
    DOWNSTREAM,
    PAYMENT_KEY_RETENTION_SECONDS,
    ProviderResponse,
    SandboxPaymentsService,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class RefundRequest:
    case_id: str
    business_ref: str  # the action id: what reconciliation looks the refund up by
    payment_reference: str
    amount_minor: int
    currency: str


@dataclass(frozen=True)
class RefundReceipt:
    refund_id: str
    business_ref: str
    amount_minor: int
    currency: str
    status: str

    def to_result(self) -> dict[str, Any]:
        """JSON-able form (for the ledger's recorded result)."""
        return {
            "refund_id": self.refund_id,
            "business_ref": self.business_ref,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "status": self.status,
        }


class PaymentProvider(Protocol):
    @property
    def idempotency_window_seconds(self) -> float:
        """How long the provider deduplicates a request by its idempotency key (Stripe: 24 h).
        A repeat after a "not found" lookup is one refund only inside this window."""
        ...

    def refund(self, request: RefundRequest, *, idempotency_key: str) -> RefundReceipt:
        """Make the refund once per idempotency key; raises only saga.adapters.errors."""
        ...

    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        """Every refund made for the reference; raising means "cannot tell".

        The answer must be read-after-write consistent: it includes every refund the provider
        has made for the reference, one whose response was lost a moment ago included. A
        source that may lag behind writes (a search index) must raise instead of returning []:
        an empty list is read as "no such refund", on which the refund may be sent again.
        """
        ...


class SandboxPaymentProvider:
    """PaymentProvider over the sandbox provider, with the faults of one case."""

    def __init__(self, service: SandboxPaymentsService, faults: FaultInjector) -> None:
        if faults.downstream != DOWNSTREAM:
            raise ValueError(f"the payment provider draws from the {DOWNSTREAM!r} fault list")
        self._service = service
        self._faults = faults

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
        injector = FaultInjector(client, sandbox_table, case_id, DOWNSTREAM, faults, clock=clock)
        return cls(service, injector)

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
