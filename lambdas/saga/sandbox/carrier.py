"""The sandbox carrier: shipments WITHOUT any idempotency, but lookup by business reference.

Every create call makes a new shipment item in SHIPMENTS_TABLE, even with a reference that
already has one: exactly the kind of downstream for which the caller must look the reference up
before re-sending anything after an uncertain outcome (docs/design.md §1). `SandboxCarrierService`
is the carrier's server side; `SandboxCarrier` is the `Carrier` port over it, with the faults
of one case.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga import formats
from saga.clock import Clock
from saga.dynamodb import to_item
from saga.fault_plan import LOSE_RESPONSE, REJECT
from saga.ports import DownstreamRejected
from saga.ports.carrier import ShipmentReceipt, ShipmentRequest
from saga.sandbox.calls import (
    append_reference_update,
    classify_failure,
    draw_fault,
    find_by_reference,
    lost_response,
)
from saga.sandbox.faults import FaultInjector, SandboxAdapter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DOWNSTREAM: Final = "shipment"  # the fault list it draws from, and the label on its errors
REFERENCE_KIND: Final = "shipments"
ADDRESS_FIELDS: Final = ("name", "line1", "city", "postal_code", "country")


class SandboxCarrierService:
    """The carrier's server side, backed by DynamoDB."""

    def __init__(
        self,
        client: DynamoDBClient,
        shipments_table: str,
        sandbox_table: str,
        clock: Clock = saga_clock.now,
        new_shipment_id: Callable[[], str] = lambda: f"shp_{uuid.uuid4().hex}",
    ) -> None:
        self.client = client
        self.shipments_table = shipments_table
        self.sandbox_table = sandbox_table
        self.clock = clock
        self.new_shipment_id = new_shipment_id

    def create_shipment(
        self,
        *,
        case_id: str,
        business_ref: str,
        address: Mapping[str, str],
        sku: str,
        quantity: int,
        faults: FaultInjector,
    ) -> dict[str, Any]:
        """POST /shipments: returns the created shipment. No idempotency whatsoever."""
        action = f"create shipment {business_ref}"
        fault = draw_fault(faults, action=action)
        invalid = _invalid_shipment(case_id, business_ref, address, sku, quantity)
        if invalid is not None:
            raise DownstreamRejected(invalid, downstream=faults.downstream)
        if fault == REJECT:
            raise DownstreamRejected(
                "the carrier refused the shipment (sandbox fault: reject)",
                downstream=faults.downstream,
            )

        now = int(self.clock())
        shipment_id = self.new_shipment_id()
        shipment = {
            "shipment_id": shipment_id,
            "case_id": case_id,
            "business_ref": business_ref,
            "address": dict(address),
            "sku": sku,
            "quantity": quantity,
            "status": "created",
            "created_at": now,
        }
        receipt = {
            "shipment_id": shipment_id,
            "business_ref": business_ref,
            "status": "created",
            "created_at": now,
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.shipments_table,
                            "Item": to_item(shipment),
                            "ConditionExpression": "attribute_not_exists(shipment_id)",
                        }
                    },
                    append_reference_update(
                        self.sandbox_table, REFERENCE_KIND, business_ref, receipt
                    ),
                ]
            )
        except (BotoCoreError, ClientError) as exc:
            raise classify_failure(exc, downstream=faults.downstream, action=action) from exc
        if fault == LOSE_RESPONSE:
            raise lost_response(faults, action=action)
        return receipt

    def find_shipments(self, business_ref: str, *, faults: FaultInjector) -> list[dict[str, Any]]:
        """GET /shipments?reference=...: every shipment created for it, oldest first."""
        return find_by_reference(
            self.client,
            self.sandbox_table,
            REFERENCE_KIND,
            business_ref,
            faults=faults,
            action=f"find shipments {business_ref}",
        )


def _invalid_shipment(
    case_id: str, business_ref: str, address: Mapping[str, str], sku: str, quantity: int
) -> str | None:
    for name, value in (("case_id", case_id), ("business_ref", business_ref), ("sku", sku)):
        if not isinstance(value, str) or not value:
            return f"invalid shipment: {name} must be a non-empty string"
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
        return "invalid shipment: quantity must be a positive integer"
    if not isinstance(address, Mapping):
        return "invalid shipment: address must be an object"
    unknown = sorted(set(address) - set(ADDRESS_FIELDS))
    if unknown:
        return f"invalid shipment: address has unknown fields {unknown}"
    for name, problem in formats.address_problems(address).items():
        return f"invalid shipment: address.{name} {problem}"
    return None


class SandboxCarrier(SandboxAdapter[SandboxCarrierService]):
    """The Carrier port over the sandbox carrier, with the faults of one case."""

    DOWNSTREAM = DOWNSTREAM
    NAME = "carrier"

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
        return cls.of_case(service, case_id=case_id, faults=faults)

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
