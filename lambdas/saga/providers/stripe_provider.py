"""Refunds through Stripe, on the official SDK, behind the PaymentProvider port (saga.ports).

What each Stripe answer means to the ledger (docs/design.md §3.4, the port's docstring):

| Stripe's answer                                   | port error                 | ledger      |
|---------------------------------------------------|----------------------------|-------------|
| 200 (a refund, a replay of the key's first one)   | a receipt                  | COMPLETED   |
| 402 card_error, 400/404 invalid_request_error     | DownstreamRejected         | FAILED      |
|   (declined, disputed, already refunded, no such  |                            |             |
|   payment), or the payment refused before sending |                            |             |
| 400 idempotency_error (key reused, other params)  | DownstreamKeyMismatch      | UNKNOWN     |
| 409 (a request with this key is in progress)      | DownstreamConflict         | UNKNOWN     |
| 429 (rate limited: not processed)                 | DownstreamNotDispatched    | RETRY       |
| 401, 403 (the key is wrong or not allowed)        | DownstreamNotDispatched    | RETRY       |
| no connection before a byte was sent              | DownstreamNotDispatched    | RETRY       |
| 5xx, a lost answer, anything else                 | DownstreamTimeout          | UNKNOWN     |

`refund` first retrieves the payment (a PaymentIntent `pi_...` with its latest charge, or a
Charge `ch_...`) and refuses, before any refund request, a payment in another currency or with
less left to refund than the signed amount; a failure of that read sent no refund, so it is
"not dispatched". Then `POST /v1/refunds` with `Idempotency-Key` = the action key, the amount
in Stripe's units (saga.providers.stripe_currencies) and `metadata` {business_ref, case_id}. A
card refund takes no currency: it refunds in the payment's.

`find_refunds` lists the payment's refunds (`GET /v1/refunds?payment_intent=` or `charge=`),
every page, and keeps those whose metadata names the business reference: a list call, read
after write consistent. Never the search API (it does not cover refunds and lags). Any failure
on any page raises DownstreamUnavailable: "cannot tell".

Stripe keeps an idempotency key 24 hours (`idempotency_window_seconds`). A refund that fails
later at the bank (status `failed` after `succeeded` or `pending`) is out of scope: the receipt
carries the status Stripe gave when it was read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, Final

import stripe
from stripe import StripeClient

from saga.ports import (
    DownstreamConflict,
    DownstreamError,
    DownstreamKeyMismatch,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.ports.payments import RefundReceipt, RefundRequest
from saga.providers.stripe_currencies import (
    UnrepresentableAmount,
    from_stripe_amount,
    to_stripe_amount,
)
from saga.providers.stripe_http import DispatchAwareClient, RequestNotSent
from saga.providers.stripe_rules import payment_parameter

DOWNSTREAM: Final = "refund"
# Stripe keeps an idempotency key (and replays its first answer) for 24 hours.
IDEMPOTENCY_WINDOW_SECONDS: Final = 24 * 3600
MAX_IDEMPOTENCY_KEY: Final = 255  # Stripe's limit on an Idempotency-Key
PAGE_SIZE: Final = 100  # the largest page Stripe's list calls return
# The refund statuses Stripe reports; a receipt carries one of them.
REFUND_STATUSES: Final = frozenset(
    {"pending", "requires_action", "succeeded", "failed", "canceled"}
)


@lru_cache(maxsize=4)
def stripe_client(api_key: str, timeout_seconds: float, api_base: str | None) -> StripeClient:
    """One client per key, timeout and base URL for the container's life: no SDK retries, the
    saga's own HTTP client (not-sent told apart), and `api_base` for a local Stripe-compatible
    server (None: Stripe's own API)."""
    return StripeClient(
        api_key,
        max_network_retries=0,
        http_client=DispatchAwareClient(
            connect_timeout=timeout_seconds, read_timeout=timeout_seconds
        ),
        base_addresses={"api": api_base} if api_base else None,
    )


class StripePaymentProvider:
    """The PaymentProvider port over Stripe, for one case's payment (its `payment_reference`)."""

    def __init__(self, client: StripeClient, *, payment_reference: str) -> None:
        parameter = payment_parameter(payment_reference)
        if parameter is None:  # ValidateCase refuses such a case; this is the adapter's guard
            raise ValueError(f"{payment_reference!r} is neither a PaymentIntent nor a Charge")
        self._client = client
        self._payment = payment_reference
        self._parameter = parameter  # "payment_intent" or "charge"

    @property
    def idempotency_window_seconds(self) -> float:
        return float(IDEMPOTENCY_WINDOW_SECONDS)

    # --- refund ---------------------------------------------------------------------------------
    def refund(self, request: RefundRequest, *, idempotency_key: str) -> RefundReceipt:
        if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
            raise DownstreamRejected(
                f"idempotency key of {len(idempotency_key)} characters, above Stripe's "
                f"{MAX_IDEMPOTENCY_KEY}",
                downstream=DOWNSTREAM,
            )
        if request.payment_reference != self._payment:
            raise DownstreamRejected(
                f"refund of {request.payment_reference}, adapter built for {self._payment}",
                downstream=DOWNSTREAM,
            )
        try:
            amount = to_stripe_amount(request.amount_minor, request.currency)
        except UnrepresentableAmount as exc:
            raise DownstreamRejected(str(exc), downstream=DOWNSTREAM) from None
        self._check_payment(request, amount)
        params: Any = {
            self._parameter: self._payment,
            "amount": amount,
            "metadata": {"business_ref": request.business_ref, "case_id": request.case_id},
        }
        try:
            refund = self._client.v1.refunds.create(
                params=params, options={"idempotency_key": idempotency_key}
            )
        except stripe.StripeError as exc:
            raise refund_error(exc) from exc
        except Exception as exc:  # after the request may have left: uncertain
            raise DownstreamTimeout(
                f"refund {request.business_ref}: {type(exc).__name__}: {exc}",
                downstream=DOWNSTREAM,
            ) from exc
        return _receipt(refund.to_dict(), expected_ref=request.business_ref, uncertain=True)

    def _check_payment(self, request: RefundRequest, amount: int) -> None:
        """Refuse, before any refund request, a payment in another currency or with less left to
        refund than the signed amount, unless what is missing is this action's own refund."""
        payment = self._retrieve_payment()
        currency = str(payment.get("currency") or "").upper()
        if currency != request.currency:
            raise DownstreamRejected(
                f"payment {self._payment} is in {currency or 'no currency'}, the approval signed "
                f"{request.currency}",
                downstream=DOWNSTREAM,
            )
        refundable = _refundable(payment)
        if refundable >= amount:
            return
        try:
            ours = self.find_refunds(request.business_ref)
        except DownstreamError as exc:  # a read: no refund was sent
            raise DownstreamNotDispatched(exc.message, downstream=DOWNSTREAM) from exc
        if ours:
            return  # this action's own refund is what is missing: the key replays it
        raise DownstreamRejected(
            f"payment {self._payment} has {refundable} left to refund (Stripe's units), the "
            f"approval signed {amount}",
            downstream=DOWNSTREAM,
        )

    def _retrieve_payment(self) -> Mapping[str, Any]:
        """The payment as a Charge's fields (a PaymentIntent's latest charge)."""
        try:
            if self._parameter == "charge":
                return self._client.v1.charges.retrieve(self._payment).to_dict()
            intent = self._client.v1.payment_intents.retrieve(
                self._payment, params={"expand": ["latest_charge"]}
            ).to_dict()
        except stripe.StripeError as exc:
            raise payment_read_error(self._payment, exc) from exc
        except Exception as exc:  # a read: no refund was sent
            raise DownstreamNotDispatched(
                f"payment {self._payment} not read: {type(exc).__name__}: {exc}",
                downstream=DOWNSTREAM,
            ) from exc
        charge = intent.get("latest_charge")
        if not isinstance(charge, Mapping):
            raise DownstreamRejected(
                f"payment {self._payment} has no charge to refund (status {intent.get('status')})",
                downstream=DOWNSTREAM,
            )
        return {**charge, "currency": intent.get("currency")}

    # --- find_refunds ---------------------------------------------------------------------------
    def find_refunds(self, business_ref: str) -> list[RefundReceipt]:
        try:
            return [
                _receipt(refund, expected_ref=business_ref, uncertain=False)
                for refund in self._every_refund()
                if (refund.get("metadata") or {}).get("business_ref") == business_ref
            ]
        except DownstreamError:
            raise
        except stripe.StripeError as exc:
            raise DownstreamUnavailable(
                f"refunds of {self._payment} not listed: {_describe(exc)}", downstream=DOWNSTREAM
            ) from exc
        except Exception as exc:  # a page not read: cannot tell
            raise DownstreamUnavailable(
                f"refunds of {self._payment} not listed: {type(exc).__name__}: {exc}",
                downstream=DOWNSTREAM,
            ) from exc

    def _every_refund(self) -> Iterator[Mapping[str, Any]]:
        """Every refund of the payment, page after page until Stripe says there is no more."""
        params: dict[str, Any] = {self._parameter: self._payment, "limit": PAGE_SIZE}
        while True:
            page = self._client.v1.refunds.list(params=params)  # type: ignore[arg-type]
            refunds = [refund.to_dict() for refund in page.data]
            yield from refunds
            if not page.has_more:
                return
            if not refunds:
                raise DownstreamUnavailable(
                    f"refunds of {self._payment}: a page says there are more, but is empty",
                    downstream=DOWNSTREAM,
                )
            params = {**params, "starting_after": refunds[-1]["id"]}


def _refundable(charge: Mapping[str, Any]) -> int:
    """What is left to refund of a charge, in Stripe's units."""
    captured = int(charge.get("amount_captured") or 0)
    refunded = int(charge.get("amount_refunded") or 0)
    return max(captured - refunded, 0)


def _receipt(refund: Mapping[str, Any], *, expected_ref: str, uncertain: bool) -> RefundReceipt:
    """A receipt from Stripe's refund; an answer that cannot be read as one is an error (an
    uncertain outcome after a create, "cannot tell" on a lookup)."""
    error = DownstreamTimeout if uncertain else DownstreamUnavailable
    try:
        currency = str(refund["currency"]).upper()
        status = str(refund["status"])
        if status not in REFUND_STATUSES:
            raise ValueError(f"unknown refund status {status!r}")
        business_ref = str((refund.get("metadata") or {}).get("business_ref", ""))
        if business_ref != expected_ref:
            raise ValueError(f"metadata business_ref {business_ref!r}, expected {expected_ref!r}")
        return RefundReceipt(
            refund_id=str(refund["id"]),
            business_ref=business_ref,
            amount_minor=from_stripe_amount(int(refund["amount"]), currency),
            currency=currency,
            status=status,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise error(
            f"refund {refund.get('id', '?')} not readable: {exc}", downstream=DOWNSTREAM
        ) from exc


def _describe(exc: stripe.StripeError) -> str:
    status = f"HTTP {exc.http_status}" if exc.http_status else type(exc).__name__
    return f"{status} {exc.code or ''}: {exc.user_message or exc}".replace("  ", " ")


def _error_type(exc: stripe.StripeError) -> str:
    body = exc.json_body if isinstance(exc.json_body, Mapping) else {}
    error = body.get("error")
    return str(error.get("type", "")) if isinstance(error, Mapping) else ""


def refund_error(exc: stripe.StripeError) -> DownstreamError:
    """What a failed `POST /v1/refunds` means to the ledger (the table above)."""
    detail = _describe(exc)
    if isinstance(exc, RequestNotSent):
        return DownstreamNotDispatched(f"not sent: {detail}", downstream=DOWNSTREAM)
    if isinstance(exc, stripe.APIConnectionError):
        return DownstreamTimeout(f"no answer: {detail}", downstream=DOWNSTREAM)
    status = exc.http_status or 0
    if status == 429 or isinstance(exc, stripe.RateLimitError):
        return DownstreamNotDispatched(f"rate limited: {detail}", downstream=DOWNSTREAM)
    if status == 409:
        return DownstreamConflict(f"key in use: {detail}", downstream=DOWNSTREAM)
    if isinstance(exc, stripe.IdempotencyError) or _error_type(exc) == "idempotency_error":
        return DownstreamKeyMismatch(f"key reused: {detail}", downstream=DOWNSTREAM)
    if status in (401, 403):
        return DownstreamNotDispatched(
            f"Stripe refused the API key ({detail}): check the secret's key and its permissions",
            downstream=DOWNSTREAM,
        )
    if status in (400, 402, 404):
        return DownstreamRejected(detail, downstream=DOWNSTREAM)
    return DownstreamTimeout(f"server error: {detail}", downstream=DOWNSTREAM)


def payment_read_error(payment: str, exc: stripe.StripeError) -> DownstreamError:
    """A failed read of the payment: no refund was sent, whatever happened to the read."""
    status = exc.http_status or 0
    if status in (400, 404):
        return DownstreamRejected(f"payment {payment}: {_describe(exc)}", downstream=DOWNSTREAM)
    return DownstreamNotDispatched(
        f"payment {payment} not read: {_describe(exc)}", downstream=DOWNSTREAM
    )
