"""The local Stripe server: the part of Stripe's v1 API the adapter uses, on loopback.

`LocalStripe` serves, with a secret key of its own (`Authorization: Bearer <key>`, else 401):
`POST /v1/payment_intents` (a test payment, confirmed with a test card), `GET
/v1/payment_intents/{intent}` (`expand[]=latest_charge`), `GET /v1/charges/{charge}`, `POST
/v1/refunds`, `GET /v1/refunds` (by payment, paginated), `GET /v1/refunds/{refund}`. Each
request is decoded and validated against Stripe's description (openapi.py) before it is acted
on, and each answer before it is sent: a request the description refuses is Stripe's 400 and
changes nothing; an answer it refuses is a bug of this server, answered 500 and kept in
`problems` (the tests assert there are none). The account's rules (idempotency keys, refundable
amounts) are account.py's. Not built on `localstripe` (PyPI, GPL-3.0): its server (read at
github.com/adrienverge/localstripe ff8ccc4, 2026-05-19) has no idempotency layer (it ignores
`Idempotency-Key`), and that layer is most of what the saga needs here.

**Faults** (docs/design.md §8), drawn per call from the case's `sandbox.faults.refund`
(faults.py), each acted out as what Stripe or the network does, and what it means to the
adapter (docs/design.md §3.13):

| fault              | the server                                  | the adapter concludes         |
|--------------------|---------------------------------------------|-------------------------------|
| fail_before_commit | 500 before executing: nothing made, stored  | uncertain (any 5xx is)        |
| lose_response      | executes (stores the answer for the key),   | uncertain; the lookup finds   |
|                    | closes the connection without an answer     | it                            |
| reject             | 400 `charge_disputed`, stored for the key   | rejected                      |
| timeout            | holds the request unexecuted until the      | uncertain; the lookup finds   |
|                    | client gives up (its read timeout)          | nothing; the same key goes    |
| unavailable        | 503 before executing, for this and every    | uncertain; the lookup cannot  |
|                    | later request about the case's payment      | tell: a person decides        |
| in_flight          | claims the key, drops the connection; the   | uncertain, then 409 or "not   |
|                    | refund commits after the next 409 for the   | found"; the same key replays  |
|                    | key or list of the payment, or half the key | the refund once it committed  |
|                    | retention after it was accepted             |                               |
| server_error       | 500 once executing: stored for the key and  | uncertain on every re-attempt |
|                    | replayed to it for 24 hours                 | with the key                  |
| rate_limited       | 429, nothing stored                         | not sent: the lease is given  |
|                    |                                             | back                          |
| key_in_use         | 409, as when another request holds the key  | uncertain (a 409 is)          |

On a lookup every fault is "no answer" (the adapter cannot tell), and a lookup answered commits
the payment's refund in flight. The server keeps its own state in memory; `reset()` empties it.
`GET /_local/refunds[?case_id=]` lists every refund made (the effects a test counts), `GET
/_local/calls?case_id=` how many calls a case made (its fault cursor): not Stripe's API, not
validated, no key needed.
"""

from __future__ import annotations

import json
import logging
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from local_aws.clock import LOCAL_CLOCK
from local_aws.loopback import DEFAULT_HOST, require_loopback
from local_aws.stripe.account import (
    KEY_RETENTION_SECONDS,
    MAX_KEY_LENGTH,
    Answer,
    StripeAccount,
    error,
    key_in_use,
)
from local_aws.stripe.faults import AmbiguousPlan, FaultBook, FaultPlans, StaticPlans
from local_aws.stripe.openapi import MalformedRequest, MalformedResponse, StripeDescription
from saga import fault_plan

logger = logging.getLogger(__name__)

DEFAULT_PORT: Final = 12111  # stripe-mock's, the port Stripe's own local server uses
LOCAL_API_KEY: Final = "sk_test_saga_local_stripe_server"
MAX_HOLD_SECONDS: Final = (
    300.0  # `timeout` holds at most this long (a client always gives up first)
)
IN_FLIGHT_COMMIT_SECONDS: Final = KEY_RETENTION_SECONDS // 2
REFUNDS: Final = "/v1/refunds"
# Faults the network or Stripe's front door acts out before the API executes anything.
_BEFORE_EXECUTING: Final = {
    fault_plan.UNAVAILABLE: error(503, "api_error", "Stripe is temporarily unavailable."),
    fault_plan.FAIL_BEFORE_COMMIT: error(500, "api_error", "An unknown error occurred"),
    fault_plan.RATE_LIMITED: error(
        429,
        "invalid_request_error",
        "Too many requests hit the API too quickly. We recommend an exponential backoff of "
        "your requests.",
        code="rate_limit",
    ),
}


@dataclass
class Outcome:
    """What the server does with one request: answer it, or not (`status` None: the connection
    is closed without an answer, after holding it while `hold`)."""

    status: int | None
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False

    @classmethod
    def of(cls, answer: Answer, **headers: str) -> Outcome:
        return cls(answer[0], answer[1], dict(headers))


@dataclass
class InFlight:
    """A refund request accepted (its key claimed) that commits later (the in_flight fault)."""

    key: str | None
    params: dict[str, Any]
    payment: str
    accepted_at: float


class LocalStripe:
    """The server, its account and its fault book; `start()` serves on a thread."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        api_key: str = LOCAL_API_KEY,
        plans: FaultPlans | None = None,
        clock: Callable[[], float] = LOCAL_CLOCK.now,
        description: StripeDescription | None = None,
    ) -> None:
        require_loopback(host, "the local Stripe server")
        self.host = host
        self.requested_port = port
        self.api_key = api_key
        self.description = description or StripeDescription.load()
        self.account = StripeAccount(self.description, clock)
        self.faults = FaultBook(plans or StaticPlans())
        self.problems: list[str] = []  # answers the description refused: bugs of this server
        self._in_flight: dict[str, InFlight] = {}  # by business reference
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the local Stripe server is not running")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def start(self) -> str:
        server = _Server((self.host, self.requested_port), _handler(self))
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="local-stripe", daemon=True
        )
        self._thread.start()
        logger.info("local Stripe server listening on %s", self.url)
        return self.url

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def reset(self, plans: FaultPlans | None = None) -> None:
        """A fresh account: no payments, refunds, keys, requests in flight or calls counted."""
        with self.account.lock:
            self.account.reset()
            self._in_flight.clear()
            self.problems.clear()
        self.faults.reset(plans)

    def __enter__(self) -> LocalStripe:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests and `sagactl local` read -------------------------------------------------
    def refunds(self, case_id: str | None = None) -> list[dict[str, Any]]:
        """Every refund made (newest first), or a case's (its `metadata.case_id`)."""
        with self.account.lock:
            return [
                self.account.refund_object(r)
                for r in reversed(self.account.refunds)
                if case_id is None or r.metadata.get("case_id") == case_id
            ]

    # --- one request -----------------------------------------------------------------------------
    def handle(self, method: str, target: str, headers: Mapping[str, str], body: str) -> Outcome:
        parts = urlsplit(target)
        if parts.path.startswith("/_local/"):
            return self._local(parts.path, parse_qs(parts.query))
        refused = self._refuse_caller(headers)
        if refused is not None:
            return Outcome.of(refused)
        found = self.description.operation(method, parts.path)
        if found is None:
            return Outcome.of(
                error(
                    404,
                    "invalid_request_error",
                    f"Unrecognized request URL ({method.upper()}: {parts.path}). The local "
                    "Stripe server serves payment intents, charges and refunds only.",
                )
            )
        operation, path_params = found
        try:
            outcome = self._serve(operation, path_params, parts.query, headers, body)
        except AmbiguousPlan as exc:
            self.problems.append(str(exc))
            outcome = Outcome.of(error(500, "api_error", f"local Stripe server: {exc}"))
        if outcome.status is not None and outcome.body is not None:
            try:
                operation.check_response(outcome.status, outcome.body)
            except MalformedResponse as exc:
                self.problems.append(str(exc))
                logger.error("local Stripe server answer refused by the description: %s", exc)
                outcome = Outcome.of(error(500, "api_error", f"local Stripe server bug: {exc}"))
        outcome.headers.setdefault("Request-Id", "req_" + secrets.token_hex(7))
        outcome.headers["Stripe-Version"] = self.description.api_version
        return outcome

    def _refuse_caller(self, headers: Mapping[str, str]) -> Answer | None:
        auth = headers.get("authorization", "")
        if auth != f"Bearer {self.api_key}":
            given = auth.removeprefix("Bearer ")
            return error(
                401,
                "invalid_request_error",
                f"Invalid API Key provided: {given[:8]}{'*' * max(len(given) - 12, 0)}"
                f"{given[-4:] if len(given) > 12 else ''}",
            )
        version = headers.get("stripe-version")
        if version is not None and version != self.description.api_version:
            return error(
                400,
                "invalid_request_error",
                f"Invalid Stripe API version: {version}: the local Stripe server speaks "
                f"{self.description.api_version} only (the pinned SDK's)",
            )
        return None

    def _serve(
        self,
        operation: Any,
        path_params: Mapping[str, str],
        query: str,
        headers: Mapping[str, str],
        body: str,
    ) -> Outcome:
        method, path = operation.method, operation.path
        raw = _raw_params(query, body)
        payment = _payment_of(path, path_params, raw, self.account)
        is_call = (method, path) == ("post", REFUNDS) or (
            (method, path) == ("get", REFUNDS) and "starting_after" not in raw
        )
        if payment is not None:
            self._commit_overdue(payment)
        if is_call:
            case_id = self._case_of(method, path, raw, payment)
            fault = self.faults.draw(case_id)
        else:  # part of a call: it draws nothing, but an unavailable case gets no answer
            case_id = None
            fault = fault_plan.UNAVAILABLE if self.faults.unavailable(payment) else None
        if fault is not None:
            logger.info("fault %s: %s %s (case %s)", fault, method.upper(), path, case_id)
        if fault == fault_plan.TIMEOUT:
            return Outcome(None, hold=True)  # never reached the API: nothing made or stored
        if fault in _BEFORE_EXECUTING:
            return Outcome.of(_BEFORE_EXECUTING[fault])
        try:
            params = operation.request(path_params, query, body)
        except MalformedRequest as exc:
            return Outcome.of(error(400, "invalid_request_error", str(exc), param=exc.param))
        if method == "post":
            outcome = self._post(path, params, headers.get("idempotency-key"), fault)
        elif is_call:
            outcome = self._lookup(params, payment, fault)
        else:
            outcome = Outcome.of(self._read(path, path_params, params))
        if fault == fault_plan.LOSE_RESPONSE:
            outcome = Outcome(None)  # done; only the answer is lost
        return outcome

    def _case_of(
        self, method: str, path: str, raw: Mapping[str, Any], payment: str | None
    ) -> str | None:
        if (method, path) == ("post", REFUNDS):
            metadata = raw.get("metadata")
            return str(metadata.get("case_id")) if isinstance(metadata, Mapping) else None
        return None if payment is None else self.faults.case_of_payment(payment)

    # --- POST: through the idempotency layer ------------------------------------------------
    def _post(
        self, path: str, params: dict[str, Any], key: str | None, fault: str | None
    ) -> Outcome:
        if key is not None and len(key) > MAX_KEY_LENGTH:
            return Outcome.of(
                error(
                    400,
                    "invalid_request_error",
                    f"Keys for idempotent requests can only be {MAX_KEY_LENGTH} characters long.",
                )
            )
        if fault == fault_plan.KEY_IN_USE:  # as if another request held the key: not stored
            return Outcome.of(key_in_use(key or ""))
        if key is not None:
            verdict = self.account.claim_key(key, f"POST {path}", params)
            if verdict.answer is not None:
                if verdict.answer[0] == 409:  # answered "in progress": then it commits
                    self._commit_key(key)
                return Outcome.of(verdict.answer, **_key_headers(key, verdict.replayed))
        answer = self._execute(path, params, key, fault)
        if answer is None:  # in flight: no answer, the key stays claimed
            return Outcome(None)
        if key is not None:
            self.account.store_answer(key, answer)
        return Outcome.of(answer, **_key_headers(key, False))

    def _execute(
        self, path: str, params: dict[str, Any], key: str | None, fault: str | None
    ) -> Answer | None:
        if path != REFUNDS:
            return self.account.create_payment_intent(params)
        if fault == fault_plan.SERVER_ERROR:
            return error(500, "api_error", "An unknown error occurred")
        if fault == fault_plan.REJECT:
            refused = self.account.check_refund(params)
            return refused or error(
                400,
                "invalid_request_error",
                "The charge has been charged back; cannot issue a refund (local Stripe server: "
                "fault reject).",
                code="charge_disputed",
            )
        if fault == fault_plan.IN_FLIGHT:
            refused = self.account.check_refund(params)
            if refused is not None:
                return refused
            payment = self.account.payment_of(
                str(params.get("payment_intent") or params.get("charge"))
            )
            assert payment is not None
            reference = str((params.get("metadata") or {}).get("business_ref") or key)
            with self.account.lock:
                self._in_flight[reference] = InFlight(
                    key, params, payment.intent_id, self.account.clock()
                )
            return None
        return self.account.create_refund(params)

    # --- the refund in flight ----------------------------------------------------------------
    def _commit(self, reference: str) -> None:
        with self.account.lock:
            pending = self._in_flight.pop(reference, None)
            if pending is None:
                return
            answer = self.account.create_refund(pending.params)
            if pending.key is not None:
                self.account.store_answer(pending.key, answer)
        logger.info("in-flight refund %s committed: %s", reference, answer[0])

    def _commit_key(self, key: str) -> None:
        with self.account.lock:
            references = [r for r, p in self._in_flight.items() if p.key == key]
        for reference in references:
            self._commit(reference)

    def _commit_payment(self, payment: str) -> None:
        with self.account.lock:
            references = [r for r, p in self._in_flight.items() if p.payment == payment]
        for reference in references:
            self._commit(reference)

    def _commit_overdue(self, payment: str) -> None:
        now = self.account.clock()
        with self.account.lock:
            overdue = [
                r
                for r, p in self._in_flight.items()
                if p.payment == payment and now >= p.accepted_at + IN_FLIGHT_COMMIT_SECONDS
            ]
        for reference in overdue:
            self._commit(reference)

    # --- GET -------------------------------------------------------------------------------------
    def _lookup(self, params: Mapping[str, Any], payment: str | None, fault: str | None) -> Outcome:
        """The first page of a payment's refunds: a lookup (a call, which may draw a fault)."""
        if fault == fault_plan.REJECT:
            return Outcome.of(
                error(
                    400,
                    "invalid_request_error",
                    "The local Stripe server refused this request (fault reject).",
                )
            )
        if fault in (fault_plan.SERVER_ERROR, fault_plan.KEY_IN_USE):
            status = 500 if fault == fault_plan.SERVER_ERROR else 409
            return Outcome.of(error(status, "api_error", "An unknown error occurred"))
        answer = self.account.list_refunds(params)
        if fault in (fault_plan.LOSE_RESPONSE, fault_plan.IN_FLIGHT):
            return Outcome(None)  # nothing to commit on a lookup: no answer only
        if payment is not None:
            self._commit_payment(payment)  # answered without it: then it commits
        return Outcome.of(answer)

    def _read(self, path: str, path_params: Mapping[str, str], params: Mapping[str, Any]) -> Answer:
        if path == REFUNDS:
            return self.account.list_refunds(params)  # a further page of a lookup
        if path.startswith("/v1/payment_intents/"):
            return self.account.payment_intent(path_params["intent"], params)
        if path.startswith("/v1/charges/"):
            return self.account.charge(path_params["charge"])
        return self.account.refund(path_params["refund"])

    # --- not Stripe's API: what a test or a person counts -------------------------------------
    def _local(self, path: str, query: Mapping[str, list[str]]) -> Outcome:
        case_id = query["case_id"][0] if query.get("case_id") else None
        if path == "/_local/refunds":
            refunds = self.refunds(case_id)
            return Outcome(200, {"object": "list", "data": refunds, "count": len(refunds)})
        if path == "/_local/calls" and case_id is not None:
            return Outcome(200, {"case_id": case_id, "calls": self.faults.calls(case_id)})
        if path == "/_local/problems":
            return Outcome(200, {"problems": list(self.problems)})
        return Outcome(404, {"error": {"type": "invalid_request_error", "message": "not found"}})

    # --- the connection ------------------------------------------------------------------------
    def hold(self, connection: socket.socket) -> None:
        """Keep a request unanswered until its client gives up (closes), or the server stops."""
        deadline = time.monotonic() + MAX_HOLD_SECONDS
        while not self._stopping.is_set() and time.monotonic() < deadline:
            ready, _, _ = select.select([connection], [], [], 0.05)
            if ready:
                try:
                    if not connection.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the Lambda runtime's deliveries connect at once (default 5)


def _key_headers(key: str | None, replayed: bool) -> dict[str, str]:
    headers = {} if key is None else {"Idempotency-Key": key}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return headers


def _raw_params(query: str, body: str) -> dict[str, Any]:
    """The request's parameters, decoded but not yet validated (to find its case)."""
    from local_aws.stripe.openapi import decode_form

    try:
        return {**decode_form(query), **decode_form(body)}
    except MalformedRequest:
        return {}


def _payment_of(
    path: str, path_params: Mapping[str, str], raw: Mapping[str, Any], account: StripeAccount
) -> str | None:
    """The PaymentIntent a request is about, if any."""
    if "intent" in path_params:
        return path_params["intent"]
    reference = path_params.get("charge") or raw.get("payment_intent") or raw.get("charge")
    if not isinstance(reference, str):
        return None
    payment = account.payment_of(reference)
    return payment.intent_id if payment is not None else reference


def _handler(stripe: LocalStripe) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "saga-local-stripe"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
            headers = {name.lower(): value for name, value in self.headers.items()}
            outcome = stripe.handle(self.command, self.path, headers, body)
            try:
                if outcome.status is None:
                    if outcome.hold:
                        stripe.hold(self.connection)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = json.dumps(outcome.body).encode()
                self.send_response(outcome.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in outcome.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except OSError:
                logger.debug("client gone before the answer to %s %s", self.command, self.path)

        do_GET = do_POST = do_DELETE = _serve

    return Handler
