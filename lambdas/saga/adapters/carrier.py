"""The carrier interface the shipment tool codes against, and its sandbox implementation.

The carrier has NO idempotency: every create call makes a new shipment. The tool sends the
action id as the shipment's business reference and, after any uncertain outcome, looks the
reference up (`find_shipments`) before anything is sent again. A lookup that raises means
"cannot tell": the outcome stays UNKNOWN and goes to reconciliation / escalation.

A real carrier adapter implements the same Protocol over its HTTP API with zero automatic
retries on create (a retried POST is a second parcel) and explicit connect/read timeouts. Its
lookup must be read-after-write consistent, or raise to say it cannot tell (see `Carrier`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from saga import clock as saga_clock
from saga.sandbox.carrier import SandboxCarrierService
from saga.sandbox.faults import Clock, FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


DOWNSTREAM = "shipment"


@dataclass(frozen=True)
class ShipmentRequest:
    case_id: str
    business_ref: str  # the action id: the only handle on the shipment after a lost response
    address: Mapping[str, str] = field(hash=False)
    sku: str
    quantity: int


@dataclass(frozen=True)
class ShipmentReceipt:
    shipment_id: str
    business_ref: str
    status: str

    def to_result(self) -> dict[str, Any]:
        """JSON-able form (for the ledger's recorded result)."""
        return {
            "shipment_id": self.shipment_id,
            "business_ref": self.business_ref,
            "status": self.status,
        }


class Carrier(Protocol):
    def create_shipment(self, request: ShipmentRequest) -> ShipmentReceipt:
        """Create a shipment (every call makes a new one); raises only saga.adapters.errors."""
        ...

    def find_shipments(self, business_ref: str) -> list[ShipmentReceipt]:
        """Every shipment created for the reference; raising means "cannot tell".

        The answer must be read-after-write consistent: it includes every shipment the carrier
        has created for the reference, one whose response was lost a moment ago included. A
        source that may lag behind writes must raise instead of returning []: an empty list is
        read as "no such shipment", on which the shipment may be created again.
        """
        ...


class SandboxCarrier:
    """Carrier over the sandbox carrier, with the faults of one case."""

    def __init__(self, service: SandboxCarrierService, faults: FaultInjector) -> None:
        if faults.downstream != DOWNSTREAM:
            raise ValueError(f"the carrier draws from the {DOWNSTREAM!r} fault list")
        self._service = service
        self._faults = faults

    @classmethod
    def create(
        cls,
        client: DynamoDBClient,
        *,
        shipments_table: str,
        sandbox_table: str,
        case_id: str,
        faults: Sequence[str] = (),
        clock: Clock = saga_clock.now,
    ) -> SandboxCarrier:
        """Explicit construction (tests, tools that already hold a client)."""
        service = SandboxCarrierService(
            client, shipments_table=shipments_table, sandbox_table=sandbox_table, clock=clock
        )
        injector = FaultInjector(client, sandbox_table, case_id, DOWNSTREAM, faults, clock=clock)
        return cls(service, injector)

    def create_shipment(self, request: ShipmentRequest) -> ShipmentReceipt:
        created = self._service.create_shipment(
            case_id=request.case_id,
            business_ref=request.business_ref,
            address=request.address,
            sku=request.sku,
            quantity=request.quantity,
            faults=self._faults,
        )
        return _receipt(created)

    def find_shipments(self, business_ref: str) -> list[ShipmentReceipt]:
        return [
            _receipt(found)
            for found in self._service.find_shipments(business_ref, faults=self._faults)
        ]


def _receipt(shipment: Mapping[str, Any]) -> ShipmentReceipt:
    return ShipmentReceipt(
        shipment_id=str(shipment["shipment_id"]),
        business_ref=str(shipment["business_ref"]),
        status=str(shipment["status"]),
    )
