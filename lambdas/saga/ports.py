"""The ports: what the tools need from each downstream, and nothing about how it is reached.

| port              | its downstream                                | a repeat is safe by          |
|-------------------|-----------------------------------------------|------------------------------|
| `PaymentProvider` | a provider that honours an idempotency key    | the key, then a lookup       |
| `Carrier`         | no idempotency; lookup by business reference  | the lookup before a re-send  |
| `Inventory`       | stock and reservations tables in this account | the ledger's own transaction |

Each port with its request, receipt and error types, in this one module (about 300 lines: a
function imports it whole, one module instead of five at cold start). The sandbox (saga.sandbox)
implements each port with switchable faults; a real provider or carrier implements the same
Protocol (see `PaymentProvider` for a sketch of Stripe's).

What a call to a remote downstream can end in, as its adapter reports it (the tools map these to
saga.errors, docs/design.md §4; on a lookup every one of them means "no answer": only a returned
list
is evidence):

| error                     | the caller knows                              | tool maps it to     |
|---------------------------|-----------------------------------------------|---------------------|
| `DownstreamRejected`      | a permanent no; nothing was done              | the business failure|
| `DownstreamNotDispatched` | nothing was done; repeating is safe           | `TransientError`    |
| `DownstreamConflict`      | a request with the same key is in flight and  | `OutcomeUnknown`    |
|                           | may still commit (HTTP 409 "in progress")     |                     |
| `DownstreamTimeout`       | the call may or may not have taken effect     | `OutcomeUnknown`    |
| `DownstreamUnavailable`   | no answer at all; a lookup cannot tell        | `OutcomeUnknown`    |
| `DownstreamKeyMismatch`   | same idempotency key, other parameters        | `OutcomeUnknown`    |

The inventory is not remote: its writes commit in the ledger's own transaction (docs/design.md
§3.9),
so its port answers in the workflow's errors directly (the ledger records a refusal); only its
lookups, like every port's, raise a DownstreamError when they cannot answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Protocol, TypeVar

from saga.dynamodb import TransactWriteItem
from saga.errors import SagaError


# --- what a remote call can end in ---------------------------------------------------------------
class DownstreamError(Exception):
    """Base of every adapter error. `downstream` names the service ("refund", "shipment", ...)."""

    def __init__(self, message: str, *, downstream: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.downstream = downstream


class DownstreamRejected(DownstreamError):
    """The downstream refused for good; repeating the same request gets the same answer."""

    def __init__(self, reason: str, *, downstream: str = "") -> None:
        super().__init__(f"rejected: {reason}", downstream=downstream)
        self.reason = reason


class DownstreamNotDispatched(DownstreamError):
    """The request provably had no effect (it failed before anything was committed)."""


class DownstreamConflict(DownstreamError):
    """A request with the same idempotency key is still in flight (HTTP 409 "in progress").

    This call did nothing, but the request in flight may still commit: the action's outcome is
    pending or unknown, never "nothing happened". A later repeat with the same key is one effect
    only while the provider still keeps the key, so the caller reconciles before repeating.
    """


class DownstreamTimeout(DownstreamError):
    """No response arrived in time: the effect may or may not have happened."""


class DownstreamUnavailable(DownstreamError):
    """The downstream gives no answer (down, unreachable): nothing can be established."""


class DownstreamKeyMismatch(DownstreamError):
    """The idempotency key was already used with different parameters.

    A contract error on the caller's side (the key must identify one set of parameters). An
    effect under this key may exist, so the tool treats it as an unknown outcome and reconciles.
    """


@dataclass(frozen=True)
class Receipt:
    """A remote downstream's answer for one effect: the payment provider's, the carrier's."""

    @property
    def downstream_ref(self) -> str:
        """The downstream's own id for the effect."""
        raise NotImplementedError

    def to_result(self) -> dict[str, Any]:
        """JSON-able form (for the ledger's recorded result): every field."""
        return asdict(self)


# --- the payment provider ------------------------------------------------------------------------
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

    Sketch for Stripe (no network code here): one HTTP client built per case, with zero
    automatic retries (a repeat is the ledger's and the workflow's decision, never the SDK's)
    and explicit connect and read timeouts that fit inside the Lambda timeout.

    - refund: POST /v1/refunds (payment_intent or charge = request.payment_reference,
      amount = request.amount_minor, metadata business_ref and case_id), header
      Idempotency-Key = the action key. 200 -> a receipt; 402 / card_error /
      invalid_request_error -> DownstreamRejected; 400 idempotency_error (key reused with
      other parameters) -> DownstreamKeyMismatch; 409 key in use -> DownstreamConflict; 429, or
      no connection before the request was sent -> DownstreamNotDispatched; a read timeout, a
      reset after sending, 5xx -> DownstreamTimeout; no response at all -> DownstreamUnavailable.
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


# --- the carrier ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShipmentRequest:
    """One shipment as the tool asks the carrier for it."""

    case_id: str
    business_ref: str  # the action id: the only handle on the shipment after a lost response
    address: Mapping[str, str] = field(hash=False)
    sku: str
    quantity: int


@dataclass(frozen=True)
class ShipmentReceipt(Receipt):
    """The carrier's answer for one shipment."""

    shipment_id: str
    business_ref: str
    status: str

    @property
    def downstream_ref(self) -> str:
        return self.shipment_id


class Carrier(Protocol):
    """Shipments WITHOUT idempotency: every create call makes a new one. The tool sends the
    action id as the business reference and, after any uncertain outcome, looks it up before
    anything is sent again. A real carrier adapter has zero automatic retries on create (a
    retried POST is a second parcel) and explicit connect/read timeouts."""

    def create_shipment(self, request: ShipmentRequest) -> ShipmentReceipt:
        """Create a shipment (every call makes a new one); raises only DownstreamError."""
        ...

    def find_shipments(self, business_ref: str) -> list[ShipmentReceipt]:
        """Every shipment created for the reference; raising means "cannot tell".

        The answer must be read-after-write consistent: it includes every shipment the carrier
        has created for the reference, one whose response was lost a moment ago included. A
        source that may lag behind writes must raise instead of returning []: an empty list is
        read as "no such shipment", on which the shipment may be created again.
        """
        ...


# --- the inventory -------------------------------------------------------------------------------
RESERVATION_HELD: Final = "HELD"
RESERVATION_RELEASED: Final = "RELEASED"

T = TypeVar("T")


@dataclass(frozen=True)
class Reservation:
    """A reservation of stock; its id is the reserve action's key."""

    reservation_id: str
    sku: str
    quantity: int
    status: str = RESERVATION_HELD
    case_id: str | None = None
    tenant_id: str | None = None
    released_by: str | None = None  # the release action's key, once released

    def to_result(self) -> dict[str, Any]:
        """JSON-able form (for the ledger's recorded result)."""
        return {"reservation_id": self.reservation_id, "sku": self.sku, "quantity": self.quantity}


@dataclass(frozen=True)
class StockWrite:
    """A reservation's writes as items of the ledger's transaction, and how to read the
    conditions of those items that failed (by index) as one error."""

    items: list[TransactWriteItem]
    explain_failure: Callable[[Mapping[int, dict[str, Any]]], SagaError]


@dataclass(frozen=True)
class ReleaseRequest:
    """The release of one reservation, applied once per release action."""

    case_id: str
    reservation_id: str
    released_by: str  # the release action's key: a release is applied once per key


class Inventory(Protocol):
    """The stock (one item per SKU) and the reservations, in this account (docs/design.md §1,
    §5)."""

    def reserve(self, reservation: Reservation) -> StockWrite:
        """The reservation (its item, the stock decrement) as transaction items: nothing is
        written here, the ledger writes them with its record."""
        ...

    def commit(self, write: Callable[[], T]) -> T:
        """One call to the inventory: run `write` (the ledger's transaction, or the release)
        and return its answer. A way to the table that can fail raises TransientError
        (nothing written) or OutcomeUnknown (written or not) around it, or refuses with a
        BusinessRejection before it."""
        ...

    def release(self, request: ReleaseRequest) -> Reservation:
        """Release a HELD reservation and give its stock back, in one transaction, at most
        once per `released_by` (a repeat returns the reservation it released). Raises
        ReservationNotHeld (none, or not HELD: released by another key, shipped), TransientError
        (changed meanwhile, nothing written) or OutcomeUnknown (no answer)."""
        ...

    def find_reservation(self, reservation_id: str) -> Reservation | None:
        """The reservation as it is now (a consistent read); raises DownstreamError when it
        cannot tell. It exists iff the reserve transaction committed."""
        ...
