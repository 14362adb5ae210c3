"""ReserveStock: stock decrement + reservation item + ledger record in ONE DynamoDB transaction.

Inventory lives in the same account, so the effect and its record commit atomically: the stock
was taken iff the reserve action's ledger record is COMPLETED iff the reservation item exists.
That makes reconciliation a plain read of the reservation item.

Sandbox faults for `reserve` are acted out around the transaction, as a flaky network between
the tool and DynamoDB would: before it (nothing written) or after it (written, answer lost).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from saga import clock as saga_clock
from saga.errors import OutcomeUnknown, OutOfStock, SagaError, TransientError
from saga.identity import Operation
from saga.ledger import (
    Absent,
    ActionLedger,
    Attempt,
    Found,
    Reconciliation,
    Undeterminable,
)
from saga.models import Case, StepResult
from saga.sandbox.faults import FAIL_BEFORE_COMMIT, LOSE_RESPONSE, REJECT, TIMEOUT, UNAVAILABLE
from saga.tools.common import (
    Clock,
    FaultSource,
    action_request,
    next_fault,
    now_iso,
    step_result,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

RESERVATION_HELD = "HELD"
RESERVATION_RELEASED = "RELEASED"


@dataclass(frozen=True)
class InventoryTables:
    client: DynamoDBClient
    inventory_table: str
    reservations_table: str
    clock: Clock = saga_clock.now

    def get_reservation(self, reservation_id: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.reservations_table,
            Key={"reservation_id": {"S": reservation_id}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        return {
            "reservation_id": item["reservation_id"]["S"],
            "sku": item["sku"]["S"],
            "quantity": int(item["quantity"]["N"]),
            "status": item["status"]["S"],
            "case_id": item.get("case_id", {}).get("S"),
            "released_by": item.get("released_by", {}).get("S"),
        }


def reservation_result(reservation_id: str, sku: str, quantity: int) -> dict[str, Any]:
    return {"reservation_id": reservation_id, "sku": sku, "quantity": quantity}


def reserve_stock(
    case: Case,
    attempt: Attempt,
    *,
    execution_arn: str | None,
    ledger: ActionLedger,
    tables: InventoryTables,
    faults: FaultSource,
) -> StepResult:
    request = action_request(case, Operation.RESERVE, execution_arn=execution_arn)
    sku, quantity = case.reserve.sku, case.reserve.quantity
    reservation_id = request.key

    fault = next_fault(faults, action=f"reserve {sku}")
    if fault == FAIL_BEFORE_COMMIT:
        raise TransientError(f"reserve {sku}: inventory write failed before commit (sandbox)")
    if fault in (TIMEOUT, UNAVAILABLE):
        raise OutcomeUnknown(f"reserve {sku}: no answer from the inventory (sandbox: {fault})")
    if fault == REJECT:
        # Raises the rejection, unless an earlier delivery already committed the reservation.
        rejection = OutOfStock(f"SKU {sku}: reservation refused (sandbox fault: reject)")
        return step_result(ledger.record_failure(request, attempt, rejection))

    outcome = ledger.execute_transaction(
        request,
        attempt,
        effect_items=_reservation_items(tables, case, reservation_id),
        result=reservation_result(reservation_id, sku, quantity),
        downstream_ref=reservation_id,
        explain_failure=lambda failed: _explain_failure(case, failed),
    )
    if fault == LOSE_RESPONSE:
        raise OutcomeUnknown(
            f"reserve {sku}: the inventory's answer was lost (sandbox: lose_response)"
        )
    return step_result(outcome)


def reconcile_reserve(
    case: Case, *, tables: InventoryTables, faults: FaultSource
) -> Reconciliation:
    """The reservation item exists iff the reserve transaction committed."""
    fault = faults.next()
    if fault is not None:
        return Undeterminable(f"inventory lookup failed (sandbox fault: {fault})")
    reservation_id = action_request(case, Operation.RESERVE).key
    reservation = tables.get_reservation(reservation_id)
    if reservation is None:
        return Absent()
    return Found(
        result=reservation_result(reservation_id, reservation["sku"], int(reservation["quantity"])),
        downstream_ref=reservation_id,
    )


def _reservation_items(
    tables: InventoryTables, case: Case, reservation_id: str
) -> list[TransactWriteItemTypeDef]:
    quantity = {"N": str(case.reserve.quantity)}
    return [
        {
            "Update": {
                "TableName": tables.inventory_table,
                "Key": {"sku": {"S": case.reserve.sku}},
                "UpdateExpression": "SET available = available - :q",
                # Also false for an unknown SKU (no `available` attribute): nothing to reserve.
                "ConditionExpression": "available >= :q",
                "ExpressionAttributeValues": {":q": quantity},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {
            "Put": {
                "TableName": tables.reservations_table,
                "Item": {
                    "reservation_id": {"S": reservation_id},
                    "sku": {"S": case.reserve.sku},
                    "quantity": quantity,
                    "status": {"S": RESERVATION_HELD},
                    "case_id": {"S": case.case_id},
                    "tenant_id": {"S": case.tenant_id},
                    "created_at": {"S": now_iso(tables.clock)},
                },
                "ConditionExpression": "attribute_not_exists(reservation_id)",
            }
        },
    ]


def _explain_failure(case: Case, failed: Mapping[int, dict[str, Any]]) -> SagaError:
    """The reservation item checked first: if it exists, an earlier delivery reserved (its
    ledger record expired or is missing), whatever the stock says now."""
    sku, quantity = case.reserve.sku, case.reserve.quantity
    if 1 in failed:
        return OutcomeUnknown(
            f"reservation for {case.case_id} already exists without a ledger record; reconcile it"
        )
    old = failed[0].get("Item") or {}
    if "available" not in old:
        return OutOfStock(f"SKU {sku} is not stocked; {quantity} requested")
    return OutOfStock(f"SKU {sku}: {old['available']['N']} available, {quantity} requested")
