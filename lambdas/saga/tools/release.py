"""ReleaseReservation: the compensation of a reservation, a ledger action of its own.

Its key is `tenant#release#<reserve action id>`, so it is tied to exactly one reservation and
recorded like any other action (design.md §5). The effect is one transaction: the reservation
HELD -> RELEASED (stamped with this release's key) and the stock given back, so stock is restored
at most once even when the answer is lost and the release is repeated: a repeat finds the
reservation released by this very key and reports success without touching stock again.

The case record is marked COMPENSATION_PENDING before anything else, so an execution that ends
FAILED at this task (a release that cannot finish) leaves a record that says so.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga.cases import CaseRecords
from saga.errors import OutcomeUnknown, ReservationNotHeld, TransientError
from saga.identity import Operation
from saga.ledger import (
    Absent,
    ActionLedger,
    ActionRequest,
    Attempt,
    EffectResult,
    Found,
    LedgerStatus,
    Reconciliation,
    Undeterminable,
)
from saga.models import Case, StepResult, approval_digest
from saga.sandbox.faults import FAIL_BEFORE_COMMIT, LOSE_RESPONSE, REJECT, TIMEOUT, UNAVAILABLE
from saga.tools.common import FaultSource, action_request, next_fault, now_iso, step_result
from saga.tools.reserve import RESERVATION_HELD, RESERVATION_RELEASED, InventoryTables

# A forward ship action in one of these states may have consumed the reserved stock.
_SHIP_STATES_THAT_BLOCK_RELEASE = frozenset(
    {LedgerStatus.COMPLETED, LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN}
)


def release_reservation(
    case: Case,
    attempt: Attempt,
    *,
    execution_arn: str,
    ledger: ActionLedger,
    tables: InventoryTables,
    cases: CaseRecords,
    faults: FaultSource,
) -> StepResult:
    cases.mark_compensation_pending(case, approval_digest(case), execution_arn)
    request = action_request(case, Operation.RELEASE, execution_arn=execution_arn)
    outcome = ledger.execute(
        request,
        attempt,
        effect=lambda: _release(case, request, ledger=ledger, tables=tables, faults=faults),
        reconcile=lambda: reconcile_release(case, tables=tables, faults=faults),
    )
    return step_result(outcome)


def reconcile_release(
    case: Case, *, tables: InventoryTables, faults: FaultSource
) -> Reconciliation:
    """Released by this key -> Found; anything else proves this release did not happen."""
    fault = faults.next()
    if fault is not None:
        return Undeterminable(f"reservation lookup failed (sandbox fault: {fault})")
    request = action_request(case, Operation.RELEASE)
    reservation = tables.get_reservation(request.compensates or "")
    if (
        reservation is not None
        and reservation["status"] == RESERVATION_RELEASED
        and reservation["released_by"] == request.key
    ):
        return Found(result=_released(reservation), downstream_ref=reservation["reservation_id"])
    return Absent()


def _release(
    case: Case,
    request: ActionRequest,
    *,
    ledger: ActionLedger,
    tables: InventoryTables,
    faults: FaultSource,
) -> EffectResult:
    fault = next_fault(faults, action=f"release for {case.case_id}")
    if fault == FAIL_BEFORE_COMMIT:
        raise TransientError(f"release for {case.case_id}: inventory refused the write ({fault})")
    # No answer may hide a release that happened: the next delivery reconciles first.
    if fault in (TIMEOUT, UNAVAILABLE):
        raise OutcomeUnknown(f"release for {case.case_id}: inventory did not answer ({fault})")
    if fault == REJECT:
        raise ReservationNotHeld(
            f"release for {case.case_id}: refused by the inventory (sandbox fault: reject)"
        )
    reservation_id = request.compensates or ""
    _check_not_shipped(case, ledger)
    result = _restore_stock_once(case, request, reservation_id, tables)
    if fault == LOSE_RESPONSE:
        raise OutcomeUnknown(
            f"release for {case.case_id}: the inventory's answer was lost (sandbox fault: "
            "lose_response); the next delivery finds the reservation released by this key"
        )
    return EffectResult(result=result, downstream_ref=reservation_id)


def _check_not_shipped(case: Case, ledger: ActionLedger) -> None:
    ship = ledger.get(action_request(case, Operation.SHIP).key)
    if ship is not None and ship.status in _SHIP_STATES_THAT_BLOCK_RELEASE:
        raise ReservationNotHeld(
            f"release for {case.case_id}: the shipment action is {ship.status.value}, so the "
            "reserved stock may have shipped; not released"
        )


def _restore_stock_once(
    case: Case, request: ActionRequest, reservation_id: str, tables: InventoryTables
) -> dict[str, Any]:
    reservation = tables.get_reservation(reservation_id)
    if reservation is None:
        raise ReservationNotHeld(f"release for {case.case_id}: no reservation {reservation_id}")
    if reservation["status"] == RESERVATION_RELEASED and reservation["released_by"] == request.key:
        return _released(reservation)  # an earlier delivery of this release did it
    if reservation["status"] != RESERVATION_HELD:
        raise ReservationNotHeld(
            f"release for {case.case_id}: reservation {reservation_id} is "
            f"{reservation['status']}, not {RESERVATION_HELD}"
        )
    quantity = {"N": str(reservation["quantity"])}
    try:
        tables.client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": tables.reservations_table,
                        "Key": {"reservation_id": {"S": reservation_id}},
                        "UpdateExpression": (
                            "SET #status = :released, released_by = :key, released_at = :now"
                        ),
                        "ConditionExpression": "#status = :held",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":released": {"S": RESERVATION_RELEASED},
                            ":held": {"S": RESERVATION_HELD},
                            ":key": {"S": request.key},
                            ":now": {"S": now_iso(tables.clock)},
                        },
                    }
                },
                {
                    "Update": {
                        "TableName": tables.inventory_table,
                        "Key": {"sku": {"S": reservation["sku"]}},
                        "UpdateExpression": "SET available = available + :q",
                        "ConditionExpression": "attribute_exists(sku)",
                        "ExpressionAttributeValues": {":q": quantity},
                    }
                },
            ]
        )
    except BotoCoreError as exc:
        # Committed or not: the next delivery reconciles and finds the release by this key.
        raise OutcomeUnknown(f"release for {case.case_id}: {exc}; reconcile") from exc
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        # Someone changed the reservation between the read and the write: decide from it again.
        current = tables.get_reservation(reservation_id)
        if current and current["status"] == RESERVATION_RELEASED:
            if current["released_by"] == request.key:
                return _released(current)
            raise ReservationNotHeld(
                f"release for {case.case_id}: reservation {reservation_id} was released by "
                f"{current['released_by']}"
            ) from exc
        raise TransientError(
            f"release for {case.case_id}: transaction cancelled, nothing written; retry"
        ) from exc
    return _released({**reservation, "status": RESERVATION_RELEASED})


def _released(reservation: dict[str, Any]) -> dict[str, Any]:
    return {
        "reservation_id": reservation["reservation_id"],
        "sku": reservation["sku"],
        "quantity": int(reservation["quantity"]),
        "status": RESERVATION_RELEASED,
    }
