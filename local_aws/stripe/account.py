"""The local Stripe account: its payments, its refunds and its idempotency keys, as Stripe keeps
them (the HTTP side and the faults are server.py's).

Stripe's documented rules it holds (API reference "Idempotent requests", "Errors", "Refunds"):

- an idempotency key (at most 255 characters) binds the endpoint and the parameters of its first
  request once that request began executing; a repeat gets the stored status and body again,
  a 500 included, for 24 hours on the local AWS's clock (`KEY_RETENTION_SECONDS`); after that
  the key is forgotten and a repeat executes anew;
- the same key with another endpoint or other parameters is a 400 `idempotency_error`; the
  same key while its first request still executes is a 409 `idempotency_key_in_use`; neither
  is stored, nor is a request refused before executing (validation, 429);
- a refund may not exceed what is left to refund (400 `amount_too_large`,
  `charge_already_refunded`); a disputed charge is not refunded (400 `charge_disputed`);
- refunds are listed newest first, `limit` (default 10, at most 100) a page, `starting_after`
  the last id of the previous page, `has_more` whether another page follows.

A PaymentIntent here has at most one Charge (the one it was confirmed with): enough for refunds.
Every object is built from its schema in the vendored description (`skeleton`: each field the
description declares, null where nullable) with the values this account holds, so what the
server sends is whole at the description's API version.
"""

from __future__ import annotations

import secrets
import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from local_aws.stripe.openapi import StripeDescription

KEY_RETENTION_SECONDS: Final = 24 * 3600
MAX_KEY_LENGTH: Final = 255
DEFAULT_PAGE: Final = 10
MAX_PAGE: Final = 100
# Stripe's test PaymentMethods the server confirms with (docs.stripe.com/testing): a card that
# pays, and one whose charge is disputed at once (its refund is refused: charge_disputed).
PAYING_CARDS: Final = frozenset({"pm_card_visa", "pm_card_mastercard", "pm_card_amex"})
DISPUTED_CARD: Final = "pm_card_createDispute"
DOC_URL: Final = "https://stripe.com/docs/error-codes/"

Answer = tuple[int, dict[str, Any]]


def error(
    status: int, kind: str, message: str, *, code: str | None = None, param: str | None = None
) -> Answer:
    """An error answer as Stripe's API reference documents it."""
    body: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        body["code"] = code
        body["doc_url"] = DOC_URL + code.replace("_", "-")
    if param is not None:
        body["param"] = param
    return status, {"error": body}


def new_id(prefix: str) -> str:
    """An id shaped as Stripe's: a prefix and 24 letters and digits."""
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(24))


@dataclass
class Payment:
    """A PaymentIntent and the Charge it was paid with (none before it is confirmed)."""

    intent_id: str
    amount: int
    currency: str  # lower case, as Stripe writes it
    created: int
    charge_id: str | None = None
    disputed: bool = False
    payment_method: str | None = None
    description: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class Refund:
    id: str
    amount: int
    currency: str
    charge_id: str
    intent_id: str
    created: int
    metadata: dict[str, str]
    reason: str | None
    status: str = "succeeded"


@dataclass
class Key:
    """An idempotency key: what its first request asked, and its stored answer once executed."""

    endpoint: str
    params: dict[str, Any]
    created: float
    answer: Answer | None = None  # None while the first request executes


@dataclass(frozen=True)
class KeyVerdict:
    """What the idempotency layer says of a request: `answer` (a replay or a refusal) or, with
    `answer` None, "execute it, the key is claimed"."""

    answer: Answer | None
    replayed: bool = False


class StripeAccount:
    """One account's state; every method is atomic (one lock)."""

    def __init__(self, description: StripeDescription, clock: Callable[[], float]) -> None:
        self.description = description
        self.clock = clock
        self.lock = threading.RLock()
        self.payments: dict[str, Payment] = {}
        self.charges: dict[str, str] = {}  # charge id -> intent id
        self.refunds: list[Refund] = []  # oldest first
        self.keys: dict[str, Key] = {}

    def reset(self) -> None:
        with self.lock:
            self.payments.clear()
            self.charges.clear()
            self.refunds.clear()
            self.keys.clear()

    def now(self) -> int:
        return int(self.clock())

    # --- idempotency keys ----------------------------------------------------------------------
    def claim_key(self, key: str, endpoint: str, params: Mapping[str, Any]) -> KeyVerdict:
        """The idempotency layer before executing `endpoint` with `params` under `key`."""
        with self.lock:
            held = self.keys.get(key)
            if held is not None and self.clock() >= held.created + KEY_RETENTION_SECONDS:
                del self.keys[key]  # pruned: the key is new again
                held = None
            if held is None:
                self.keys[key] = Key(endpoint, dict(params), self.clock())
                return KeyVerdict(None)
            if held.endpoint != endpoint or held.params != dict(params):
                return KeyVerdict(
                    error(
                        400,
                        "idempotency_error",
                        "Keys for idempotent requests can only be used with the same parameters "
                        f"they were first used with. Try using a key other than '{key}' if you "
                        "meant to execute a different request.",
                    )
                )
            if held.answer is None:
                return KeyVerdict(key_in_use(key))
            return KeyVerdict(held.answer, replayed=True)

    def store_answer(self, key: str, answer: Answer) -> None:
        with self.lock:
            held = self.keys.get(key)
            if held is not None and held.answer is None:
                held.answer = answer

    def executing(self, key: str) -> bool:
        with self.lock:
            held = self.keys.get(key)
            return held is not None and held.answer is None

    # --- payments ------------------------------------------------------------------------------
    def seed_payment(
        self, intent_id: str, amount: int, currency: str, *, disputed: bool = False
    ) -> None:
        """A PaymentIntent paid with a test card, with a fixed id (the example cases name it)."""
        with self.lock:
            payment = Payment(intent_id, amount, currency.lower(), self.now())
            self._pay(payment, DISPUTED_CARD if disputed else "pm_card_visa")

    def _pay(self, payment: Payment, payment_method: str) -> None:
        payment.charge_id = "ch_" + payment.intent_id.removeprefix("pi_")
        payment.payment_method = payment_method
        payment.disputed = payment_method == DISPUTED_CARD
        self.payments[payment.intent_id] = payment
        self.charges[payment.charge_id] = payment.intent_id

    def create_payment_intent(self, params: Mapping[str, Any]) -> Answer:
        """POST /v1/payment_intents: confirmed at once with a test card, or left to confirm."""
        with self.lock:
            payment = Payment(
                new_id("pi_"),
                int(params["amount"]),
                str(params["currency"]).lower(),
                self.now(),
                description=params.get("description"),
                metadata=_metadata(params.get("metadata")),
            )
            method = params.get("payment_method")
            if params.get("confirm"):
                if method not in PAYING_CARDS and method != DISPUTED_CARD:
                    return error(
                        400,
                        "invalid_request_error",
                        f"No such PaymentMethod: '{method}'; the local Stripe server confirms "
                        f"with {', '.join(sorted(PAYING_CARDS | {DISPUTED_CARD}))}",
                        code="resource_missing",
                        param="payment_method",
                    )
                self._pay(payment, str(method))
            else:
                self.payments[payment.intent_id] = payment
            return 200, self.payment_intent_object(payment, expand=_expand(params))

    def payment_intent(self, intent_id: str, params: Mapping[str, Any]) -> Answer:
        with self.lock:
            payment = self.payments.get(intent_id)
            if payment is None:
                return _missing("payment_intent", intent_id, "intent")
            return 200, self.payment_intent_object(payment, expand=_expand(params))

    def charge(self, charge_id: str) -> Answer:
        with self.lock:
            intent_id = self.charges.get(charge_id)
            if intent_id is None:
                return _missing("charge", charge_id, "charge")
            return 200, self.charge_object(self.payments[intent_id])

    def payment_of(self, reference: str) -> Payment | None:
        """The payment a PaymentIntent or a Charge id names."""
        with self.lock:
            intent_id = self.charges.get(reference, reference)
            return self.payments.get(intent_id)

    # --- refunds -------------------------------------------------------------------------------
    def check_refund(self, params: Mapping[str, Any]) -> Answer | None:
        """Stripe's refusal of this refund (stored for its key: execution began), or None."""
        with self.lock:
            name = "payment_intent" if "payment_intent" in params else "charge"
            reference = params.get(name)
            if reference is None:
                return error(
                    400,
                    "invalid_request_error",
                    "One of the following params should be provided for this request: "
                    "payment_intent or charge.",
                )
            payment = self.payment_of(str(reference))
            if payment is None or (name == "charge") != str(reference).startswith("ch_"):
                return error(
                    400,
                    "invalid_request_error",
                    f"No such {name}: '{reference}'",
                    code="resource_missing",
                    param=name,
                )
            if payment.charge_id is None:
                return error(
                    400,
                    "invalid_request_error",
                    f"This PaymentIntent ({payment.intent_id}) does not have a successful "
                    "charge to refund.",
                )
            if payment.disputed:
                return error(
                    400,
                    "invalid_request_error",
                    f"Charge {payment.charge_id} has been charged back; cannot issue a refund.",
                    code="charge_disputed",
                )
            left = payment.amount - self.refunded(payment)
            if left <= 0:
                return error(
                    400,
                    "invalid_request_error",
                    f"Charge {payment.charge_id} has already been refunded.",
                    code="charge_already_refunded",
                )
            amount = int(params.get("amount", left))
            if amount > left:
                return error(
                    400,
                    "invalid_request_error",
                    f"Refund amount ({amount}) is greater than unrefunded amount on charge "
                    f"({left})",
                    code="amount_too_large",
                    param="amount",
                )
            return None

    def create_refund(self, params: Mapping[str, Any]) -> Answer:
        """The refund, made (or Stripe's refusal of it)."""
        with self.lock:
            refused = self.check_refund(params)
            if refused is not None:
                return refused
            payment = self.payment_of(str(params.get("payment_intent") or params.get("charge")))
            assert payment is not None and payment.charge_id is not None
            refund = Refund(
                new_id("re_"),
                int(params.get("amount", payment.amount - self.refunded(payment))),
                payment.currency,
                payment.charge_id,
                payment.intent_id,
                self.now(),
                _metadata(params.get("metadata")),
                params.get("reason"),
            )
            self.refunds.append(refund)
            return 200, self.refund_object(refund)

    def refunded(self, payment: Payment) -> int:
        return sum(
            r.amount
            for r in self.refunds
            if r.intent_id == payment.intent_id and r.status in ("succeeded", "pending")
        )

    def list_refunds(self, params: Mapping[str, Any]) -> Answer:
        with self.lock:
            chosen = [
                r
                for r in reversed(self.refunds)  # newest first
                if params.get("payment_intent") in (None, r.intent_id)
                and params.get("charge") in (None, r.charge_id)
            ]
            limit = int(params.get("limit", DEFAULT_PAGE))
            if not 1 <= limit <= MAX_PAGE:
                return error(
                    400,
                    "invalid_request_error",
                    f"Invalid limit: must be between 1 and {MAX_PAGE}",
                    param="limit",
                )
            if "starting_after" in params:
                ids = [r.id for r in chosen]
                if params["starting_after"] not in ids:
                    return _missing("refund", str(params["starting_after"]), "starting_after")
                chosen = chosen[ids.index(params["starting_after"]) + 1 :]
            page = chosen[:limit]
            return 200, {
                "object": "list",
                "data": [self.refund_object(r) for r in page],
                "has_more": len(chosen) > limit,
                "url": "/v1/refunds",
            }

    def refund(self, refund_id: str) -> Answer:
        with self.lock:
            for refund in self.refunds:
                if refund.id == refund_id:
                    return 200, self.refund_object(refund)
            return _missing("refund", refund_id, "refund")

    # --- objects ---------------------------------------------------------------------------------
    def charge_object(self, payment: Payment) -> dict[str, Any]:
        assert payment.charge_id is not None
        refunded = self.refunded(payment)
        return self._build(
            "charge",
            id=payment.charge_id,
            amount=payment.amount,
            amount_captured=payment.amount,
            amount_refunded=refunded,
            captured=True,
            created=payment.created,
            currency=payment.currency,
            disputed=payment.disputed,
            paid=True,
            payment_intent=payment.intent_id,
            payment_method=payment.payment_method,
            refunded=refunded >= payment.amount,
            status="succeeded",
            description=payment.description,
            metadata=dict(payment.metadata),
        )

    def payment_intent_object(self, payment: Payment, *, expand: frozenset[str]) -> dict[str, Any]:
        charge: Any = payment.charge_id
        if charge is not None and "latest_charge" in expand:
            charge = self.charge_object(payment)
        paid = payment.charge_id is not None
        return self._build(
            "payment_intent",
            id=payment.intent_id,
            amount=payment.amount,
            amount_received=payment.amount if paid else 0,
            capture_method="automatic",
            confirmation_method="automatic",
            created=payment.created,
            currency=payment.currency,
            description=payment.description,
            latest_charge=charge,
            metadata=dict(payment.metadata),
            payment_method=payment.payment_method,
            payment_method_types=["card"],
            status="succeeded" if paid else "requires_payment_method",
        )

    def refund_object(self, refund: Refund) -> dict[str, Any]:
        return self._build(
            "refund",
            id=refund.id,
            amount=refund.amount,
            charge=refund.charge_id,
            created=refund.created,
            currency=refund.currency,
            metadata=dict(refund.metadata),
            payment_intent=refund.intent_id,
            reason=refund.reason,
            status=refund.status,
        )

    def _build(self, schema: str, **values: Any) -> dict[str, Any]:
        built = skeleton(self.description, {"$ref": f"#/components/schemas/{schema}"})
        assert isinstance(built, dict)
        unknown = set(values) - set(built)
        if unknown:  # a field this API version does not have: a bug of the server
            raise KeyError(f"{schema} has no field {sorted(unknown)}")
        return {**built, **values} | ({"livemode": False} if "livemode" in built else {})


def key_in_use(key: str) -> Answer:
    return error(
        409,
        "invalid_request_error",
        "There is currently another in-progress request using this idempotent key (that "
        "probably means you submitted twice, and the other request is still going through): "
        f"{key}. Please try again later.",
        code="idempotency_key_in_use",
    )


def skeleton(description: StripeDescription, schema: Mapping[str, Any]) -> Any:
    """The emptiest value `schema` allows: null where nullable, every required field present."""
    schema = description.resolve(schema)
    if schema.get("nullable"):
        return None
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return skeleton(description, schema["anyOf"][0])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: skeleton(description, sub) for name, sub in properties.items()}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": []}.get(str(kind))


def _metadata(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _expand(params: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(str(e) for e in params.get("expand") or ())


def _missing(kind: str, resource_id: str, param: str) -> Answer:
    return error(
        404,
        "invalid_request_error",
        f"No such {kind}: '{resource_id}'",
        code="resource_missing",
        param=param,
    )
