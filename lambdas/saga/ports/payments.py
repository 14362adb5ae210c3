"""The payment provider port: refunds made once per idempotency key, found by business
reference (saga.ports for what a call can end in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from saga.ports import Receipt


@dataclass(frozen=True)
class RefundRequest:
    """One refund as the tool asks the payment provider for it."""

    case_id: str
    business_ref: str  # the action id: what reconciliation looks the refund up by
    payment_reference: str
    amount_minor: int
    currency: str


@dataclass(frozen=True)
class RefundReceipt(Receipt):
    """The payment provider's answer for one refund."""

    refund_id: str
    business_ref: str
    amount_minor: int
    currency: str
    status: str

    @property
    def downstream_ref(self) -> str:
        return self.refund_id


class PaymentProvider(Protocol):
    """Refunds made once per idempotency key (the action key), looked up by business reference.

    The tool passes the action key as the idempotency key, so a repeat of the same refund (a
    retry, a redrive, a takeover) is one refund at the provider for as long as the provider
    keeps the key (24 h at Stripe). After that only the business reference protects the action:
    the tool reconciles with `find_refunds(business_ref)` instead of sending again.

    Stripe's adapter is saga.providers.stripe_provider (docs/design.md §3.13): one client per
    container with zero automatic retries (a repeat is the ledger's and the workflow's
    decision, never the SDK's) and explicit connect and read timeouts that fit inside the
    Lambda timeout; its HTTP client tells a request not sent from one that may have left.

    - refund: POST /v1/refunds (payment_intent or charge = request.payment_reference,
      amount = request.amount_minor in Stripe's units, metadata business_ref and case_id),
      header Idempotency-Key = the action key. 200 -> a receipt; 402 / card_error /
      invalid_request_error -> DownstreamRejected; 400 idempotency_error (key reused with
      other parameters) -> DownstreamKeyMismatch; 409 key in use -> DownstreamConflict; 429, or
      no connection before the request was sent -> DownstreamNotDispatched; a read timeout, a
      reset after sending, 5xx, anything it cannot tell -> DownstreamTimeout.
    - find_refunds: GET /v1/refunds?payment_intent=<payment_reference>&limit=100, then
      starting_after=<last id> while has_more (a list call, which Stripe serves
      read-after-write consistent), keeping the refunds whose metadata business_ref matches.
      Not Stripe's search API: it does not cover refunds and lags writes by up to a minute, so
      a refund whose response was just lost could be missing from it. A timeout, an error or a
      page not read -> DownstreamUnavailable ("cannot tell"); [] only after every page was read.
    """

    @property
    def idempotency_window_seconds(self) -> float:
        """How long the provider deduplicates a request by its idempotency key (Stripe: 24 h).
        A repeat after a "not found" lookup is one refund only inside this window."""
        ...

    def refund(self, request: RefundRequest, *, idempotency_key: str) -> RefundReceipt:
        """Make the refund once per idempotency key; raises only DownstreamError."""
        ...

    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        """Every refund made for the reference; raising means "cannot tell".

        The answer must be read-after-write consistent: it includes every refund the provider
        has made for the reference, one whose response was lost a moment ago included. A
        source that may lag behind writes (a search index) must raise instead of returning []:
        an empty list is read as "no such refund", on which the refund may be sent again.
        """
        ...
