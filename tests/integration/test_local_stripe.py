"""The local Stripe server (local_aws.stripe) through the real adapter: Stripe's documented
idempotency and refund rules, and each refund fault as docs/design.md §3.13 says the adapter
must read it. The adapter is the saga's own (saga.providers.stripe_provider on the official SDK
and saga.providers.stripe_http); only the server is local. No AWS: the faults come from plans
given here (the local AWS's are read from the cases it runs: tests/e2e/test_stripe_paths.py).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from local_aws.stripe.account import KEY_RETENTION_SECONDS
from local_aws.stripe.faults import StaticPlans
from local_aws.stripe.server import IN_FLIGHT_COMMIT_SECONDS, LOCAL_API_KEY, LocalStripe
from saga.ports import (
    DownstreamConflict,
    DownstreamKeyMismatch,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.ports.payments import RefundReceipt, RefundRequest
from saga.providers.stripe_provider import StripePaymentProvider, stripe_client

PAYMENT = "pi_3LocalTestPayment00000001"
CASE = "case-stripe-1"
REF = f"acme#refund#{CASE}"
KEY = f"acme#refund#{CASE}.refund"
READ_TIMEOUT = 0.5  # the adapter's connect and read timeouts here (a held request waits this)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def plans() -> StaticPlans:
    return StaticPlans()


@pytest.fixture
def server(plans: StaticPlans, clock: Clock) -> Iterator[LocalStripe]:
    with LocalStripe(port=0, plans=plans, clock=clock) as stripe:
        stripe.account.seed_payment(PAYMENT, 2000, "USD")
        yield stripe
        assert stripe.problems == []  # no answer the description refused was ever sent


def provider(
    server: LocalStripe, payment: str = PAYMENT, timeout: float = READ_TIMEOUT
) -> StripePaymentProvider:
    client = stripe_client(LOCAL_API_KEY, timeout, server.url)
    return StripePaymentProvider(client, payment_reference=payment)


def request(amount: int = 1500, case_id: str = CASE, payment: str = PAYMENT) -> RefundRequest:
    return RefundRequest(
        case_id=case_id,
        business_ref=f"acme#refund#{case_id}",
        payment_reference=payment,
        amount_minor=amount,
        currency="USD",
    )


def refund(server: LocalStripe, amount: int = 1500, key: str = KEY) -> RefundReceipt:
    return provider(server).refund(request(amount), idempotency_key=key)


def raw(
    server: LocalStripe,
    method: str,
    path: str,
    body: str = "",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request as the SDK sends it (form-encoded, the key in a header), its answer read."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        connection.request(
            method,
            path,
            body=body or None,
            headers={
                "Authorization": f"Bearer {LOCAL_API_KEY}",
                "Content-Type": "application/x-www-form-urlencoded",
                **(headers or {}),
            },
        )
        response = connection.getresponse()
        answer = json.loads(response.read())
        return response.status, answer, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


REFUND_FORM = (  # what the adapter sends for `request()`
    f"payment_intent={PAYMENT}&amount=1500&metadata[business_ref]={REF}&metadata[case_id]={CASE}"
)


# --- Stripe's rules -------------------------------------------------------------------------------
def test_a_repeat_with_the_same_key_replays_the_first_refund(server: LocalStripe) -> None:
    first = refund(server)
    again = refund(server)

    assert again == first and first.status == "succeeded"
    assert [r["id"] for r in server.refunds(CASE)] == [first.refund_id]
    status, body, headers = raw(
        server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": KEY}
    )
    assert (status, body["id"], headers["idempotent-replayed"]) == (200, first.refund_id, "true")
    assert provider(server).find_refunds(REF) == [first]


def test_the_same_key_with_other_parameters_is_an_idempotency_error_and_stores_nothing(
    server: LocalStripe,
) -> None:
    first = refund(server)

    with pytest.raises(DownstreamKeyMismatch, match="same parameters they were first used"):
        refund(server, amount=100)

    assert refund(server) == first  # the key still holds its first answer
    assert len(server.refunds()) == 1


def test_a_concurrent_request_with_the_same_key_is_a_409_and_changes_nothing(
    server: LocalStripe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fault: the first request is held while it executes; the second, with its key, is a
    409 that stores nothing, and once the first finished the key replays its refund."""
    executing, release = threading.Event(), threading.Event()
    create = server.account.create_refund

    def slow_create(params: Any) -> Any:
        executing.set()
        release.wait(5)
        return create(params)

    monkeypatch.setattr(server.account, "create_refund", slow_create)
    first: list[tuple[int, dict[str, Any], dict[str, str]]] = []
    thread = threading.Thread(
        target=lambda: first.append(
            raw(server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": KEY})
        )
    )
    thread.start()
    assert executing.wait(5)

    status, body, headers = raw(
        server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": KEY}
    )
    release.set()
    thread.join()

    assert (status, body["error"]["code"]) == (409, "idempotency_key_in_use")
    assert "idempotent-replayed" not in headers
    [(first_status, made, _)] = first
    assert first_status == 200 and [r["id"] for r in server.refunds()] == [made["id"]]
    status, again, headers = raw(
        server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": KEY}
    )
    assert (status, again["id"], headers["idempotent-replayed"]) == (200, made["id"], "true")


def test_a_key_is_kept_24_hours_then_a_repeat_executes_again(
    server: LocalStripe, clock: Clock
) -> None:
    first = refund(server, amount=500)
    clock.now += KEY_RETENTION_SECONDS - 1
    assert refund(server, amount=500) == first

    clock.now += 1
    second = refund(server, amount=500)

    assert second.refund_id != first.refund_id
    assert len(server.refunds(CASE)) == 2


def test_a_key_of_more_than_255_characters_is_refused_before_anything_is_stored(
    server: LocalStripe,
) -> None:
    status, body, _ = raw(
        server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": "k" * 256}
    )

    assert (status, body["error"]["type"]) == (400, "invalid_request_error")
    assert "255 characters" in body["error"]["message"]
    assert server.refunds() == [] and server.account.keys == {}
    status, _, _ = raw(server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": "k" * 255})
    assert status == 200


def test_a_refund_beyond_what_is_left_is_refused_and_the_refusal_is_stored_for_its_key(
    server: LocalStripe,
) -> None:
    refund(server, amount=1500, key="first")
    form = f"payment_intent={PAYMENT}&amount=600&metadata[business_ref]=other"

    status, body, _ = raw(server, "POST", "/v1/refunds", form, {"Idempotency-Key": "second"})
    assert (status, body["error"]["code"], body["error"]["param"]) == (
        400,
        "amount_too_large",
        "amount",
    )
    refund(server, amount=500, key="third")  # what was left
    status, body, headers = raw(server, "POST", "/v1/refunds", form, {"Idempotency-Key": "second"})
    assert (status, body["error"]["code"], headers["idempotent-replayed"]) == (
        400,
        "amount_too_large",
        "true",
    )
    status, body, _ = raw(server, "POST", "/v1/refunds", form, {"Idempotency-Key": "fourth"})
    assert (status, body["error"]["code"]) == (400, "charge_already_refunded")
    assert sum(r["amount"] for r in server.refunds()) == 2000


def test_the_adapter_refuses_a_payment_with_too_little_left_before_any_refund_request(
    server: LocalStripe,
) -> None:
    refund(server, amount=1500, key="first")

    with pytest.raises(DownstreamRejected, match="has 500 left to refund"):
        provider(server).refund(request(600, case_id="case-other"), idempotency_key="other")

    assert len(server.refunds()) == 1


def test_a_disputed_charge_is_not_refunded(server: LocalStripe) -> None:
    status, intent, _ = raw(
        server,
        "POST",
        "/v1/payment_intents",
        "amount=2000&currency=usd&confirm=true&payment_method=pm_card_createDispute",
    )
    assert (status, intent["status"]) == (200, "succeeded")

    with pytest.raises(DownstreamRejected, match="charged back"):
        provider(server, intent["id"]).refund(
            request(payment=intent["id"]), idempotency_key="disputed"
        )
    assert server.refunds() == []


def test_refunds_are_listed_newest_first_a_page_at_a_time(server: LocalStripe) -> None:
    """The adapter's lookup reads every page: 250 refunds of one payment are three pages."""
    server.account.seed_payment("pi_3LocalManyRefunds000000001", 10_000, "USD")
    for index in range(250):
        server.account.create_refund(
            {
                "payment_intent": "pi_3LocalManyRefunds000000001",
                "amount": 1,
                "metadata": {"business_ref": REF if index in (0, 249) else f"other-{index}"},
            }
        )
    lookups: list[str] = []
    original = server.handle

    def counting(method: str, target: str, headers: Any, body: str) -> Any:
        lookups.append(target)
        return original(method, target, headers, body)

    server.handle = counting  # type: ignore[method-assign]

    # Three pages of 100 refunds, each validated against the description: a roomy timeout, so
    # a loaded machine is not read as a lost answer.
    found = provider(server, "pi_3LocalManyRefunds000000001", timeout=30).find_refunds(REF)

    ids = [r.id for r in reversed(server.account.refunds) if r.metadata["business_ref"] == REF]
    assert [receipt.refund_id for receipt in found] == ids  # the newest first
    assert len(lookups) == 3 and "starting_after" in lookups[2]


# --- the description --------------------------------------------------------------------------
def test_a_request_stripes_description_refuses_is_a_400_and_changes_nothing(
    server: LocalStripe,
) -> None:
    for form, message in (
        (REFUND_FORM + "&amuont=12", "Received unknown parameter: amuont"),
        (f"payment_intent={PAYMENT}&amount=twelve", "Invalid amount"),
        (f"payment_intent={PAYMENT}&metadata[a][b]=c", "Invalid metadata"),
    ):
        status, body, _ = raw(server, "POST", "/v1/refunds", form, {"Idempotency-Key": form})
        assert (status, body["error"]["type"]) == (400, "invalid_request_error"), form
        assert message in body["error"]["message"]
    status, body, _ = raw(server, "GET", f"/v1/refunds?payment_intent={PAYMENT}&limit=x")
    assert (status, body["error"]["param"]) == (400, "limit")

    assert server.refunds() == [] and server.account.keys == {}


def test_an_answer_stripes_description_refuses_is_never_sent(
    server: LocalStripe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug of the server (a refund with a field of the wrong type) is caught before sending:
    the client gets a 500 naming it, and it is kept in `problems`."""
    real = server.account.refund_object
    monkeypatch.setattr(
        server.account, "refund_object", lambda r: {**real(r), "amount": str(r.amount)}
    )

    with pytest.raises(DownstreamTimeout, match="local Stripe server bug"):
        refund(server)

    [problem] = server.problems
    assert "POST /v1/refunds 200: amount: '1500' is not of type 'integer'" in problem
    server.problems.clear()


def test_a_wrong_api_key_or_api_version_is_refused(server: LocalStripe) -> None:
    client = stripe_client("sk_test_not_the_local_key", READ_TIMEOUT, server.url)
    with pytest.raises(DownstreamNotDispatched, match="HTTP 401 : Invalid API Key provided"):
        StripePaymentProvider(client, payment_reference=PAYMENT).refund(
            request(), idempotency_key=KEY
        )
    status, body, _ = raw(
        server, "GET", f"/v1/payment_intents/{PAYMENT}", headers={"Stripe-Version": "2020-08-27"}
    )
    assert status == 400 and "2026-10-28.endive only" in body["error"]["message"]
    assert server.refunds() == []


# --- the faults ---------------------------------------------------------------------------------
def with_faults(plans: StaticPlans, *faults: str) -> None:
    plans.plan(CASE, PAYMENT, faults)


def test_lose_response_makes_the_refund_and_loses_its_answer(
    server: LocalStripe, plans: StaticPlans
) -> None:
    with_faults(plans, "lose_response")

    with pytest.raises(DownstreamTimeout, match="RemoteDisconnected"):
        refund(server)

    [made] = server.refunds(CASE)
    assert [r.refund_id for r in provider(server).find_refunds(REF)] == [made["id"]]
    assert refund(server).refund_id == made["id"]  # the key replays it
    # The refund, the lookup, and the repeat's own lookup (less than the amount is left: the
    # adapter looks for its own refund first) and refund.
    assert server.faults.calls(CASE) == 4


def test_the_adapters_own_lookup_inside_a_refund_draws_a_fault_and_sends_no_refund(
    server: LocalStripe, plans: StaticPlans
) -> None:
    """After a lost answer less than the amount is left, so a repeat looks for its own refund
    before sending: that lookup is a call of its own. Drawing a 429 it cannot tell, so the
    repeat sends nothing (not dispatched); the next repeat finds the refund and the key
    replays it."""
    with_faults(plans, "lose_response", "rate_limited")
    with pytest.raises(DownstreamTimeout):
        refund(server)
    [made] = server.refunds(CASE)
    keys_before = dict(server.account.keys)

    with pytest.raises(DownstreamNotDispatched, match="not listed: HTTP 429"):
        refund(server)  # the lookup could not tell: no refund request

    assert server.faults.calls(CASE) == 2  # the refund, then the repeat's own lookup
    assert server.account.keys == keys_before  # no refund request reached the key
    assert refund(server).refund_id == made["id"]
    assert server.faults.calls(CASE) == 4  # the next repeat: its lookup, its refund
    assert len(server.refunds(CASE)) == 1


def test_fail_before_commit_is_a_500_before_executing_nothing_stored(
    server: LocalStripe, plans: StaticPlans
) -> None:
    """A 5xx is uncertain to the adapter (Stripe may have executed); here nothing was stored
    for the key, so after the lookup finds nothing the same key makes the refund."""
    with_faults(plans, "fail_before_commit")

    with pytest.raises(DownstreamTimeout, match="HTTP 500"):
        refund(server)

    assert server.refunds() == [] and server.account.keys == {}
    assert provider(server).find_refunds(REF) == []
    assert refund(server).status == "succeeded"
    assert len(server.refunds(CASE)) == 1


def test_server_error_is_a_500_stored_for_the_key_and_replayed_for_24_hours(
    server: LocalStripe, plans: StaticPlans, clock: Clock
) -> None:
    with_faults(plans, "server_error")

    for _ in range(2):
        with pytest.raises(DownstreamTimeout, match="HTTP 500"):
            refund(server)
    status, _, headers = raw(server, "POST", "/v1/refunds", REFUND_FORM, {"Idempotency-Key": KEY})
    assert (status, headers.get("idempotent-replayed")) == (500, "true")
    assert server.refunds() == []

    clock.now += KEY_RETENTION_SECONDS
    assert refund(server).status == "succeeded"  # the key was pruned: a new request
    assert len(server.refunds(CASE)) == 1


def test_rate_limited_is_a_429_not_processed_nothing_stored(
    server: LocalStripe, plans: StaticPlans
) -> None:
    with_faults(plans, "rate_limited")

    with pytest.raises(DownstreamNotDispatched, match="rate limited"):
        refund(server)

    assert server.account.keys == {} and server.refunds() == []
    assert refund(server).status == "succeeded"


def test_key_in_use_is_a_409_nothing_stored(server: LocalStripe, plans: StaticPlans) -> None:
    with_faults(plans, "key_in_use")

    with pytest.raises(DownstreamConflict, match="HTTP 409"):
        refund(server)

    assert server.account.keys == {} and server.refunds() == []
    assert refund(server).status == "succeeded"


def test_reject_is_a_refusal_stored_for_the_key(server: LocalStripe, plans: StaticPlans) -> None:
    with_faults(plans, "reject")

    for _ in range(2):
        with pytest.raises(DownstreamRejected, match="charged back"):
            refund(server)

    assert server.refunds() == []


def test_timeout_holds_the_request_until_the_client_gives_up_and_executes_nothing(
    server: LocalStripe, plans: StaticPlans
) -> None:
    with_faults(plans, "timeout")

    with pytest.raises(DownstreamTimeout, match="timed out"):
        refund(server)

    assert server.refunds() == [] and server.account.keys == {}
    assert provider(server).find_refunds(REF) == []
    assert refund(server).status == "succeeded"


def test_unavailable_answers_nothing_about_the_case_from_then_on(
    server: LocalStripe, plans: StaticPlans
) -> None:
    with_faults(plans, "unavailable")

    with pytest.raises(DownstreamTimeout, match="HTTP 503"):
        refund(server)
    with pytest.raises(DownstreamUnavailable, match="HTTP 503"):
        provider(server).find_refunds(REF)
    with pytest.raises(DownstreamNotDispatched, match="not read"):
        refund(server)  # the payment's read fails now too: no refund request is sent

    assert server.refunds() == []
    assert server.faults.calls(CASE) == 2  # the payment's read is no call of its own


def test_in_flight_holds_the_key_then_commits_after_a_409(
    server: LocalStripe, plans: StaticPlans
) -> None:
    """A request still executing: its repeat is a 409 (nothing done by that repeat), after which
    the first commits; the next repeat replays its refund. One refund."""
    with_faults(plans, "in_flight")

    with pytest.raises(DownstreamTimeout, match="RemoteDisconnected"):
        refund(server)
    assert server.refunds() == [] and server.account.executing(KEY)

    with pytest.raises(DownstreamConflict, match="idempotent key"):
        refund(server)

    [made] = server.refunds(CASE)
    assert refund(server).refund_id == made["id"]


def test_in_flight_commits_after_a_lookup_answered_not_found(
    server: LocalStripe, plans: StaticPlans
) -> None:
    with_faults(plans, "in_flight")
    with pytest.raises(DownstreamTimeout):
        refund(server)

    assert provider(server).find_refunds(REF) == []  # not found: then it commits

    [made] = server.refunds(CASE)
    assert [r.refund_id for r in provider(server).find_refunds(REF)] == [made["id"]]
    assert refund(server).refund_id == made["id"]


def test_in_flight_commits_by_half_the_key_retention_whoever_asks(
    server: LocalStripe, plans: StaticPlans, clock: Clock
) -> None:
    with_faults(plans, "in_flight")
    with pytest.raises(DownstreamTimeout):
        refund(server)

    clock.now += IN_FLIGHT_COMMIT_SECONDS
    raw(server, "GET", f"/v1/payment_intents/{PAYMENT}")

    assert len(server.refunds(CASE)) == 1


def test_concurrent_calls_draw_each_fault_once(server: LocalStripe, plans: StaticPlans) -> None:
    """The cursor is atomic: eight lookups at once draw the eight faults, one each."""
    faults = ["rate_limited", "fail_before_commit", "server_error", "key_in_use"] * 2
    with_faults(plans, *faults)
    barrier = threading.Barrier(len(faults))
    errors: list[str] = []

    def lookup() -> None:
        barrier.wait()
        try:
            provider(server).find_refunds(REF)
        except DownstreamUnavailable as exc:
            errors.append(exc.message)

    threads = [threading.Thread(target=lookup) for _ in faults]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert server.faults.calls(CASE) == len(faults)
    answers = sorted(e.split("not listed: ")[1][:8] for e in errors)
    assert answers == sorted(["HTTP 429", "HTTP 500", "HTTP 500", "HTTP 409"] * 2)
    assert provider(server).find_refunds(REF) == []  # the plan ran out: an answer


def test_two_cases_with_refund_faults_on_one_payment_are_told_apart_or_named(
    server: LocalStripe, plans: StaticPlans
) -> None:
    plans.plan(CASE, PAYMENT, ["rate_limited"])
    plans.plan("case-stripe-2", PAYMENT, ["rate_limited"])

    with pytest.raises(DownstreamNotDispatched, match="rate limited"):
        refund(server)  # a refund names its case: told apart
    with pytest.raises(DownstreamUnavailable, match="give each such case its own payment"):
        provider(server).find_refunds(REF)  # a lookup names only the payment

    assert server.problems == [
        f"cases {CASE}, case-stripe-2 all name payment {PAYMENT} and have refund faults: whose "
        "call this is cannot be told; give each such case its own payment"
    ]
    server.problems.clear()
