"""ReleaseReservation: the compensation of a reservation, a ledger action of its own.

Its key is `tenant#release#<reserve action id>`, so it is tied to exactly one reservation and
recorded like any other action (docs/design.md §5). The effect is one transaction of the inventory:
the reservation HELD -> RELEASED (stamped with this release's key) and the stock given back, so
stock is restored at most once even when the answer is lost and the release is repeated: a
repeat finds the reservation released by this very key and reports success without touching
stock again. A shipment that may have consumed the stock blocks the release.

The case record is marked COMPENSATION_PENDING before anything else, so an execution that ends
FAILED at this task (a release that cannot finish) leaves a record that says so.
"""

from __future__ import annotations

from typing import Any

from saga.cases import CaseRecords
from saga.errors import ReservationNotHeld
from saga.identity import Operation, action_request
from saga.ledger import (
    Absent,
    ActionLedger,
    Attempt,
    EffectResult,
    Found,
    LedgerStatus,
    Reconciliation,
    Undeterminable,
)
from saga.models import Case, StepResult, approval_digest
from saga.ports import DownstreamError
from saga.ports.inventory import RESERVATION_RELEASED, Inventory, ReleaseRequest, Reservation

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
    inventory: Inventory,
    cases: CaseRecords,
) -> StepResult:
    cases.mark_compensation_pending(case, approval_digest(case), execution_arn)
    request = action_request(case, Operation.RELEASE, execution_arn=execution_arn)

    def release() -> EffectResult:
        _check_not_shipped(case, ledger)
        released = inventory.release(
            ReleaseRequest(case.case_id, request.compensates or "", released_by=request.key)
        )
        return EffectResult(result=_released(released), downstream_ref=released.reservation_id)

    outcome = ledger.execute(
        request,
        attempt,
        effect=lambda: inventory.commit(release),
        reconcile=lambda: reconcile_release(case, inventory=inventory),
    )
    return StepResult.of(outcome)


def reconcile_release(case: Case, *, inventory: Inventory) -> Reconciliation:
    """Released by this key -> Found; anything else proves this release did not happen."""
    request = action_request(case, Operation.RELEASE)
    try:
        reservation = inventory.find_reservation(request.compensates or "")
    except DownstreamError as exc:
        return Undeterminable(exc.message)
    if (
        reservation is not None
        and reservation.status == RESERVATION_RELEASED
        and reservation.released_by == request.key
    ):
        return Found(result=_released(reservation), downstream_ref=reservation.reservation_id)
    return Absent()


def _check_not_shipped(case: Case, ledger: ActionLedger) -> None:
    ship = ledger.get(action_request(case, Operation.SHIP).key)
    if ship is not None and ship.status in _SHIP_STATES_THAT_BLOCK_RELEASE:
        raise ReservationNotHeld(
            f"release for {case.case_id}: the shipment action is {ship.status.value}, so the "
            "reserved stock may have shipped; not released"
        )


def _released(reservation: Reservation) -> dict[str, Any]:
    return {**reservation.to_result(), "status": RESERVATION_RELEASED}
