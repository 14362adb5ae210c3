"""The Inventory port over this account's tables: INVENTORY_TABLE (one item per SKU, `sku` and an
integer `available`) and RESERVATIONS_TABLE (pk `reservation_id` = the reserve action's key).

A reservation's writes (the stock decrement on `available >= quantity`, the reservation item,
new) are items of the ledger's own transaction (docs/design.md §3.9), so the stock was taken iff the
reserve action's record is COMPLETED iff the reservation item exists: a lookup is a plain read.
A release is one transaction too: the reservation HELD -> RELEASED, stamped with the release's
key, and the stock given back, so the stock returns at most once (docs/design.md §5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga.clock import Clock, now_iso
from saga.dynamodb import TRANSACTION_CANCELLED, TransactWriteItem, error_code
from saga.errors import OutcomeUnknown, OutOfStock, ReservationNotHeld, SagaError, TransientError
from saga.ports.inventory import (
    RESERVATION_HELD,
    RESERVATION_RELEASED,
    ReleaseRequest,
    Reservation,
    StockWrite,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

T = TypeVar("T")


class InventoryTables:
    """The stock and reservations tables in this account (the inventory port)."""

    def __init__(
        self,
        client: DynamoDBClient,
        inventory_table: str,
        reservations_table: str,
        clock: Clock = saga_clock.now,
    ) -> None:
        self.client = client
        self.inventory_table = inventory_table
        self.reservations_table = reservations_table
        self.clock = clock

    def reserve(self, reservation: Reservation) -> StockWrite:
        quantity = {"N": str(reservation.quantity)}
        item: dict[str, Any] = {
            "reservation_id": {"S": reservation.reservation_id},
            "sku": {"S": reservation.sku},
            "quantity": quantity,
            "status": {"S": RESERVATION_HELD},
            **{
                name: {"S": value}
                for name, value in (
                    ("case_id", reservation.case_id),
                    ("tenant_id", reservation.tenant_id),
                )
                if value is not None
            },
            "created_at": {"S": now_iso(self.clock)},
        }
        stock_update: TransactWriteItem = {
            "Update": {
                "TableName": self.inventory_table,
                "Key": {"sku": {"S": reservation.sku}},
                "UpdateExpression": "SET available = available - :q",
                # Also false for an unknown SKU (no `available` attribute): nothing to reserve.
                "ConditionExpression": "available >= :q",
                "ExpressionAttributeValues": {":q": quantity},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        reservation_put: TransactWriteItem = {
            "Put": {
                "TableName": self.reservations_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(reservation_id)",
            }
        }
        return StockWrite(
            items=[stock_update, reservation_put],
            explain_failure=lambda failed: _reservation_refused(reservation, failed),
        )

    def commit(self, write: Callable[[], T]) -> T:
        return write()  # the table is in this account: nothing stands between

    def find_reservation(self, reservation_id: str) -> Reservation | None:
        response = self.client.get_item(
            TableName=self.reservations_table,
            Key={"reservation_id": {"S": reservation_id}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        return Reservation(
            reservation_id=item["reservation_id"]["S"],
            sku=item["sku"]["S"],
            quantity=int(item["quantity"]["N"]),
            status=item["status"]["S"],
            case_id=item.get("case_id", {}).get("S"),
            tenant_id=item.get("tenant_id", {}).get("S"),
            released_by=item.get("released_by", {}).get("S"),
        )

    def release(self, request: ReleaseRequest) -> Reservation:
        what = f"release for {request.case_id}"
        reservation_id = request.reservation_id
        reservation = self.find_reservation(reservation_id)
        if reservation is None:
            raise ReservationNotHeld(f"{what}: no reservation {reservation_id}")
        if _released_by(reservation, request.released_by):
            return reservation  # an earlier delivery of this release did it
        if reservation.status != RESERVATION_HELD:
            raise ReservationNotHeld(
                f"{what}: reservation {reservation_id} is {reservation.status}, "
                f"not {RESERVATION_HELD}"
            )
        try:
            self.client.transact_write_items(
                TransactItems=self._release_items(reservation, request)
            )
        except BotoCoreError as exc:
            # Committed or not: the next delivery reconciles and finds the release by this key.
            raise OutcomeUnknown(f"{what}: {exc}; reconcile") from exc
        except ClientError as exc:
            if error_code(exc) != TRANSACTION_CANCELLED:
                raise
            # Someone changed the reservation between the read and the write: decide again.
            current = self.find_reservation(reservation_id)
            if current and current.status == RESERVATION_RELEASED:
                if current.released_by == request.released_by:
                    return current
                raise ReservationNotHeld(
                    f"{what}: reservation {reservation_id} was released by {current.released_by}"
                ) from exc
            raise TransientError(f"{what}: transaction cancelled, nothing written; retry") from exc
        return Reservation(
            reservation_id=reservation.reservation_id,
            sku=reservation.sku,
            quantity=reservation.quantity,
            status=RESERVATION_RELEASED,
            case_id=reservation.case_id,
            tenant_id=reservation.tenant_id,
            released_by=request.released_by,
        )

    def _release_items(
        self, reservation: Reservation, request: ReleaseRequest
    ) -> list[TransactWriteItem]:
        return [
            {
                "Update": {
                    "TableName": self.reservations_table,
                    "Key": {"reservation_id": {"S": reservation.reservation_id}},
                    "UpdateExpression": (
                        "SET #status = :released, released_by = :key, released_at = :now"
                    ),
                    "ConditionExpression": "#status = :held",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {
                        ":released": {"S": RESERVATION_RELEASED},
                        ":held": {"S": RESERVATION_HELD},
                        ":key": {"S": request.released_by},
                        ":now": {"S": now_iso(self.clock)},
                    },
                }
            },
            {
                "Update": {
                    "TableName": self.inventory_table,
                    "Key": {"sku": {"S": reservation.sku}},
                    "UpdateExpression": "SET available = available + :q",
                    "ConditionExpression": "attribute_exists(sku)",
                    "ExpressionAttributeValues": {":q": {"N": str(reservation.quantity)}},
                }
            },
        ]


def _released_by(reservation: Reservation, key: str) -> bool:
    return reservation.status == RESERVATION_RELEASED and reservation.released_by == key


def _reservation_refused(
    reservation: Reservation, failed: Mapping[int, dict[str, Any]]
) -> SagaError:
    """The reservation item checked first: if it exists, an earlier delivery reserved (its
    ledger record expired or is missing), whatever the stock says now."""
    sku, quantity = reservation.sku, reservation.quantity
    if 1 in failed:
        return OutcomeUnknown(
            f"reservation for {reservation.case_id} already exists without a ledger record; "
            "reconcile it"
        )
    old = failed[0].get("Item") or {}
    if "available" not in old:
        return OutOfStock(f"SKU {sku} is not stocked; {quantity} requested")
    return OutOfStock(f"SKU {sku}: {old['available']['N']} available, {quantity} requested")
