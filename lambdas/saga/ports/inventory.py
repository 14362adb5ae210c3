"""The inventory port: stock and reservations in this account, written in the ledger's own
transaction (saga.ports for what a lookup can end in)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from saga.dynamodb import TransactWriteItem
from saga.errors import SagaError

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
