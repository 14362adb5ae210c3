"""The carrier port: shipments without idempotency, found by business reference (saga.ports for
what a call can end in)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from saga.ports import Receipt


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
