"""The Stripe adapter against recorded Stripe answers: the real SDK, the saga's HTTP client, a
loopback server (tests/recorded_stripe.py). Every answer maps to exactly one port error as the
port's docstring says; the key header, the amount and the metadata are what Stripe receives."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any

import pytest

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
from saga.providers.stripe_http import (
    DispatchAwareClient,
    RequestMaybeSent,
    RequestNotSent,
)
from saga.providers.stripe_provider import (
    IDEMPOTENCY_WINDOW_SECONDS,
    PAGE_SIZE,
    StripePaymentProvider,
    stripe_client,
)
from tests.recorded_stripe import HANG_UP, RecordedStripe, error, fixture, page

PI, CH = "pi_3PgafyB7WZ01zgkW1ZFSgWqJ", "ch_3PgafyB7WZ01zgkW1lKyWkxm"
KEY = "acme#refund#case-1.refund"
REF = "case-1.refund"
TIMEOUT = 2.0


def request(amount: int = 2500, currency: str = "USD", payment: str = PI) -> RefundRequest:
    return RefundRequest(
        case_id="case-1",
        business_ref=REF,
        payment_reference=payment,
        amount_minor=amount,
        currency=currency,
    )


def charge(captured: int = 5000, refunded: int = 0, currency: str = "usd") -> dict[str, Any]:
    return fixture(
        "charge",
        id=CH,
        currency=currency,
        amount=captured,
        amount_captured=captured,
        amount_refunded=refunded,
        captured=True,
        payment_intent=PI,
    )


def intent(currency: str = "usd", **charge_fields: Any) -> dict[str, Any]:
    return fixture(
        "payment_intent",
        id=PI,
        currency=currency,
        status="succeeded",
        latest_charge=charge(currency=currency, **charge_fields),
    )


def refund(
    refund_id: str = "re_3PgafyB7WZ01zgkW0Ma1Q2",
    *,
    amount: int = 2500,
    currency: str = "usd",
    business_ref: str = REF,
    status: str = "succeeded",
) -> dict[str, Any]:
    return fixture(
        "refund",
        id=refund_id,
        amount=amount,
        currency=currency,
        charge=CH,
        payment_intent=PI,
        status=status,
        metadata={"business_ref": business_ref, "case_id": "case-1"},
    )


@pytest.fixture
def stripe() -> Iterator[RecordedStripe]:
    with RecordedStripe().running() as server:
        yield server


def provider(server: RecordedStripe, payment: str = PI) -> StripePaymentProvider:
    stripe_client.cache_clear()
    return StripePaymentProvider(
        stripe_client("sk_test_recorded", TIMEOUT, server.url), payment_reference=payment
    )


# --- refund: what Stripe receives ------------------------------------------------------------
def test_a_refund_sends_the_action_key_the_amount_and_the_metadata_once(
    stripe: RecordedStripe,
) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent()))
    stripe.answer("POST", "/v1/refunds", (200, refund()))

    receipt = provider(stripe).refund(request(), idempotency_key=KEY)

    assert receipt == RefundReceipt(
        refund_id="re_3PgafyB7WZ01zgkW0Ma1Q2",
        business_ref=REF,
        amount_minor=2500,
        currency="USD",
        status="succeeded",
    )
    (read,) = stripe.requests("GET", f"/v1/payment_intents/{PI}")
    assert read.query["expand[0]"] == ["latest_charge"]
    (sent,) = stripe.requests("POST", "/v1/refunds")
    assert sent.headers["idempotency-key"] == KEY
    assert sent.headers["authorization"] == "Bearer sk_test_recorded"
    assert sent.form == {
        "payment_intent": [PI],
        "amount": ["2500"],
        "metadata[business_ref]": [REF],
        "metadata[case_id]": ["case-1"],
    }  # no currency: a card refund is in the payment's


def test_a_charge_is_read_and_refunded_as_a_charge(stripe: RecordedStripe) -> None:
    stripe.answer("GET", f"/v1/charges/{CH}", (200, charge()))
    stripe.answer("POST", "/v1/refunds", (200, refund()))

    provider(stripe, CH).refund(request(payment=CH), idempotency_key=KEY)

    (sent,) = stripe.requests("POST", "/v1/refunds")
    assert sent.form["charge"] == [CH] and "payment_intent" not in sent.form
    assert sent.headers["idempotency-key"] == KEY


def test_the_window_is_stripes_24_hours() -> None:
    assert IDEMPOTENCY_WINDOW_SECONDS == 24 * 3600


@pytest.mark.parametrize(
    ("currency", "signed", "sent"),
    [
        ("JPY", 2500, "2500"),
        ("ISK", 2500, "250000"),
        ("MGA", 250000, "2500"),
        ("KWD", 2500, "2500"),
    ],
)
def test_the_amount_sent_is_stripes_and_the_receipt_isos(
    stripe: RecordedStripe, currency: str, signed: int, sent: str
) -> None:
    stripe.answer(
        "GET", f"/v1/payment_intents/{PI}", (200, intent(currency.lower(), captured=10**9))
    )
    stripe.answer("POST", "/v1/refunds", (200, refund(amount=int(sent), currency=currency.lower())))

    receipt = provider(stripe).refund(request(signed, currency), idempotency_key=KEY)

    assert stripe.requests("POST", "/v1/refunds")[0].form["amount"] == [sent]
    assert (receipt.amount_minor, receipt.currency) == (signed, currency)


# --- refund: refused before any refund request ------------------------------------------------
def test_a_payment_in_another_currency_is_refused_before_a_refund(stripe: RecordedStripe) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent("eur")))

    with pytest.raises(DownstreamRejected, match="in EUR, the approval signed USD"):
        provider(stripe).refund(request(), idempotency_key=KEY)

    assert stripe.requests("POST", "/v1/refunds") == []


def test_a_payment_with_less_left_than_signed_is_refused_before_a_refund(
    stripe: RecordedStripe,
) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent(captured=5000, refunded=3000)))
    stripe.answer(
        "GET", "/v1/refunds", (200, page([refund("re_other", business_ref="x")], has_more=False))
    )

    with pytest.raises(DownstreamRejected, match="has 2000 left to refund"):
        provider(stripe).refund(request(2500), idempotency_key=KEY)

    assert stripe.requests("POST", "/v1/refunds") == []


def test_what_is_missing_being_this_actions_own_refund_sends_the_key_again(
    stripe: RecordedStripe,
) -> None:
    """A refund of this action that committed after a lookup said "absent": the payment has
    less left, the key replays the first answer."""
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent(captured=2500, refunded=2500)))
    stripe.answer("GET", "/v1/refunds", (200, page([refund()], has_more=False)))
    stripe.answer("POST", "/v1/refunds", (200, refund()))

    receipt = provider(stripe).refund(request(2500), idempotency_key=KEY)

    assert receipt.refund_id == "re_3PgafyB7WZ01zgkW0Ma1Q2"
    assert stripe.requests("POST", "/v1/refunds")[0].headers["idempotency-key"] == KEY


def test_a_payment_intent_without_a_charge_is_refused(stripe: RecordedStripe) -> None:
    unpaid = fixture("payment_intent", id=PI, currency="usd", latest_charge=None)
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, unpaid))

    with pytest.raises(DownstreamRejected, match="no charge to refund"):
        provider(stripe).refund(request(), idempotency_key=KEY)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (error("resource_missing"), DownstreamRejected),
        (error("authentication"), DownstreamNotDispatched),
        (error("rate_limit"), DownstreamNotDispatched),
        (error("api_error"), DownstreamNotDispatched),
        (HANG_UP, DownstreamNotDispatched),
    ],
)
def test_a_failed_read_of_the_payment_sent_no_refund(
    stripe: RecordedStripe, answer: Any, expected: type[DownstreamError]
) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", answer)

    with pytest.raises(expected):
        provider(stripe).refund(request(), idempotency_key=KEY)

    assert stripe.requests("POST", "/v1/refunds") == []


def test_a_key_longer_than_stripes_255_is_refused_unsent(stripe: RecordedStripe) -> None:
    with pytest.raises(DownstreamRejected, match="above Stripe's 255"):
        provider(stripe).refund(request(), idempotency_key="k" * 256)
    assert stripe.seen == []


def test_the_longest_action_key_fits_stripes_limit() -> None:
    from saga.identity import Operation, action_id_for, action_key

    longest = action_key("t" * 63, Operation.REFUND, action_id_for("c" * 80, Operation.REFUND))
    assert len(longest) <= 255


# --- refund: every answer as the port's error --------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("card_declined", DownstreamRejected),
        ("charge_already_refunded", DownstreamRejected),
        ("charge_disputed", DownstreamRejected),
        ("amount_too_large", DownstreamRejected),
        ("resource_missing", DownstreamRejected),
        ("idempotency_error", DownstreamKeyMismatch),
        ("idempotency_key_in_use", DownstreamConflict),
        ("rate_limit", DownstreamNotDispatched),
        ("authentication", DownstreamNotDispatched),
        ("permission", DownstreamNotDispatched),
        ("api_error", DownstreamTimeout),
        ("service_unavailable", DownstreamTimeout),
    ],
)
def test_each_stripe_error_is_one_port_error_and_one_request(
    stripe: RecordedStripe, name: str, expected: type[DownstreamError]
) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent()))
    stripe.answer("POST", "/v1/refunds", error(name))

    with pytest.raises(DownstreamError) as raised:
        provider(stripe).refund(request(), idempotency_key=KEY)

    assert type(raised.value) is expected
    assert len(stripe.requests("POST", "/v1/refunds")) == 1  # the SDK repeats nothing


def test_a_lost_answer_after_sending_is_uncertain(stripe: RecordedStripe) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent()))
    stripe.answer("POST", "/v1/refunds", HANG_UP)

    with pytest.raises(DownstreamTimeout, match="no answer"):
        provider(stripe).refund(request(), idempotency_key=KEY)

    assert len(stripe.requests("POST", "/v1/refunds")) == 1  # it was sent


def test_an_unreadable_refund_answer_is_uncertain(stripe: RecordedStripe) -> None:
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent()))
    stripe.answer("POST", "/v1/refunds", (200, refund(status="mystery")))

    with pytest.raises(DownstreamTimeout, match="not readable"):
        provider(stripe).refund(request(), idempotency_key=KEY)


def test_no_connection_for_the_refund_is_not_dispatched(stripe: RecordedStripe) -> None:
    """The payment is read; the refund's connection is refused: nothing was sent."""
    from stripe import StripeClient

    opened: list[str] = []

    def second_refused(scheme: str, host: str, port: int | None, timeout: float) -> Any:
        opened.append(host)
        if len(opened) == 2:
            raise ConnectionRefusedError(111, "Connection refused")
        return http.client.HTTPConnection(host, port, timeout=timeout)

    client = StripeClient(
        "sk_test_recorded",
        max_network_retries=0,
        http_client=DispatchAwareClient(
            connect_timeout=TIMEOUT, read_timeout=TIMEOUT, connection_factory=second_refused
        ),
        base_addresses={"api": stripe.url},
    )
    stripe.answer("GET", f"/v1/payment_intents/{PI}", (200, intent()))

    with pytest.raises(DownstreamNotDispatched, match="not sent"):
        StripePaymentProvider(client, payment_reference=PI).refund(request(), idempotency_key=KEY)

    assert stripe.requests("POST", "/v1/refunds") == []


# --- find_refunds ------------------------------------------------------------------------------
def test_every_page_is_read_and_only_this_references_refunds_kept(stripe: RecordedStripe) -> None:
    others = [refund(f"re_{i:03d}", business_ref=f"other-{i}.refund") for i in range(3)]
    ours = refund("re_ours", status="pending")
    stripe.answer(
        "GET",
        "/v1/refunds",
        (200, page(others[:2], has_more=True)),
        (200, page(others[2:], has_more=True)),
        (200, page([ours], has_more=False)),
    )

    found = provider(stripe).find_refunds(REF)

    assert [(r.refund_id, r.status) for r in found] == [("re_ours", "pending")]
    pages = stripe.requests("GET", "/v1/refunds")
    assert [p.query.get("starting_after") for p in pages] == [None, ["re_001"], ["re_002"]]
    assert all(
        p.query["payment_intent"] == [PI] and p.query["limit"] == [str(PAGE_SIZE)] for p in pages
    )


def test_a_charges_refunds_are_listed_by_charge(stripe: RecordedStripe) -> None:
    stripe.answer("GET", "/v1/refunds", (200, page([], has_more=False)))

    assert provider(stripe, CH).find_refunds(REF) == []
    assert stripe.requests("GET", "/v1/refunds")[0].query["charge"] == [CH]


@pytest.mark.parametrize(
    "status", ["pending", "succeeded", "failed", "canceled", "requires_action"]
)
def test_the_receipt_carries_stripes_status(stripe: RecordedStripe, status: str) -> None:
    stripe.answer("GET", "/v1/refunds", (200, page([refund(status=status)], has_more=False)))

    (found,) = provider(stripe).find_refunds(REF)

    assert found.status == status


@pytest.mark.parametrize(
    "pages",
    [
        [error("api_error")],
        [error("rate_limit")],
        [HANG_UP],
        [(200, page([refund("re_1", business_ref="x")], has_more=True)), error("api_error")],
        [(200, page([refund("re_1", business_ref="x")], has_more=True)), HANG_UP],
        [(200, page([], has_more=True))],
        [(200, page([refund(status="mystery")], has_more=False))],
    ],
    ids=[
        "500",
        "429",
        "hang-up",
        "page-2-500",
        "page-2-hang-up",
        "empty-but-more",
        "unknown-status",
    ],
)
def test_a_lookup_that_cannot_read_everything_cannot_tell(
    stripe: RecordedStripe, pages: list[Any]
) -> None:
    stripe.answer("GET", "/v1/refunds", *pages)

    with pytest.raises(DownstreamUnavailable):
        provider(stripe).find_refunds(REF)


# --- the HTTP client: sent or not ----------------------------------------------------------------
class FakeConnection:
    """An http.client connection failing at one phase: connect, send or receive."""

    def __init__(self, fail_at: str) -> None:
        self.fail_at = fail_at
        self.sock = None
        self.closed = False

    def connect(self) -> None:
        if self.fail_at == "connect":
            raise TimeoutError("timed out")

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.fail_at == "send":
            raise BrokenPipeError(32, "Broken pipe")

    def getresponse(self) -> Any:
        raise TimeoutError("timed out")

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("fail_at", "raised"),
    [("connect", RequestNotSent), ("send", RequestMaybeSent), ("receive", RequestMaybeSent)],
)
def test_only_a_failure_before_the_first_byte_is_not_sent(fail_at: str, raised: type) -> None:
    connection = FakeConnection(fail_at)
    client = DispatchAwareClient(
        connect_timeout=1.0,
        read_timeout=1.0,
        connection_factory=lambda *a: connection,  # type: ignore[arg-type]
    )

    with pytest.raises(raised):
        client.request("post", "https://api.stripe.com/v1/refunds", {}, "amount=1")

    assert connection.closed
