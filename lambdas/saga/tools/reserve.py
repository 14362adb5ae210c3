"""ReserveStock: stock decrement + reservation item + ledger record in ONE DynamoDB transaction.

Inventory lives in the same account, so the effect and its record commit atomically: the stock
was taken iff the reserve action's ledger record is COMPLETED iff the reservation item exists.
That makes reconciliation a plain read of the reservation item. The inventory port supplies the
transaction's items and its way to the table (`commit`), around which a flaky connection to
the table acts (the sandbox's faults).
"""

from __future__ import annotations

from saga.identity import Operation, action_request, reservation_id
from saga.ledger import Absent, ActionLedger, Attempt, Found, Reconciliation, Undeterminable
from saga.models import Case, StepResult
from saga.ports import DownstreamError
from saga.ports.inventory import Inventory, Reservation


def reserve_stock(
    case: Case,
    attempt: Attempt,
    *,
    execution_arn: str | None,
    ledger: ActionLedger,
    inventory: Inventory,
) -> StepResult:
    request = action_request(case, Operation.RESERVE, execution_arn=execution_arn)
    reservation = Reservation(
        reservation_id=request.key,
        sku=case.reserve.sku,
        quantity=case.reserve.quantity,
        case_id=case.case_id,
        tenant_id=case.tenant_id,
    )
    stock = inventory.reserve(reservation)
    outcome = ledger.execute_transaction(
        request,
        attempt,
        effect_items=stock.items,
        result=reservation.to_result(),
        downstream_ref=reservation.reservation_id,
        explain_failure=stock.explain_failure,
        commit=inventory.commit,
    )
    return StepResult.of(outcome)


def reconcile_reserve(case: Case, *, inventory: Inventory) -> Reconciliation:
    """The reservation item exists iff the reserve transaction committed."""
    try:
        reservation = inventory.find_reservation(reservation_id(case))
    except DownstreamError as exc:
        return Undeterminable(exc.message)
    if reservation is None:
        return Absent()
    return Found(result=reservation.to_result(), downstream_ref=reservation.reservation_id)
