"""CreateShipment: a shipment at a carrier WITHOUT idempotency, guarded by the ledger.

Every create call makes a new parcel, so the only protection is the ledger plus the business
reference (the action id) sent with every request: after any uncertain outcome (an UNKNOWN
record, an expired lease) the ledger makes this tool look the reference up before anything is
sent again, and a carrier that cannot answer leaves the outcome UNKNOWN for reconciliation.
"""

from __future__ import annotations

from saga.cases import CaseRecords
from saga.errors import AuthorizationDenied, SagaError, ShipmentRejected
from saga.identity import ActionRequest, Operation, action_request
from saga.ledger import ActionLedger, Attempt, CompanionWrite, EffectResult, Reconciliation
from saga.models import Case, StepResult, approval_digest
from saga.ports import DownstreamError, DownstreamRejected
from saga.ports.carrier import Carrier, ShipmentRequest
from saga.tools.downstream import dispatch, reconcile_by_reference, unanswered_call_error


def create_shipment(
    case: Case,
    attempt: Attempt,
    *,
    execution_arn: str,
    ledger: ActionLedger,
    carrier: Carrier,
    cases: CaseRecords,
) -> StepResult:
    """The shipment, the last effect: whatever way it succeeds (dispatched, found by a takeover's
    lookup, replayed), the case record says COMPLETED with it, in one transaction with the
    ledger's completion where this delivery writes it (docs/design.md §3.11), so the workflow
    needs no state of its own to record the outcome. A case record that refuses it raises
    CaseRecordRefused once the shipment's completion is recorded."""
    request = action_request(case, Operation.SHIP, execution_arn=execution_arn)
    digest = approval_digest(case)
    completed = CompanionWrite(
        cases.completed_update(case, digest, execution_arn),
        lambda old: cases.completion_refused(
            case, digest, execution_arn, f"shipment {request.key}", old
        ),
    )
    outcome = ledger.execute(
        request,
        attempt,
        effect=lambda: _ship(case, request, carrier),
        reconcile=lambda: reconcile_shipment(request.reference, carrier),
        companion=completed,
    )
    return StepResult.of(outcome)


def replay_shipment(case: Case, *, execution_arn: str, ledger: ActionLedger) -> StepResult:
    """A delivery of CreateShipment for a case its shipment completed already (its answer was
    lost, the execution is redriven): the recorded shipment, read, never sent again; without
    one (a record past its retention) the case has ended and the delivery is refused."""
    request = action_request(case, Operation.SHIP, execution_arn=execution_arn)
    outcome = ledger.recorded_completion(request)
    if outcome is None:
        raise AuthorizationDenied(
            f"case {case.case_id}: not a case under way (case record COMPLETED) and no "
            f"recorded shipment {request.key} to answer: a forward step runs only in the "
            "execution ValidateCase accepted it for, until the case ends"
        )
    return StepResult.of(outcome)


def reconcile_shipment(business_ref: str, carrier: Carrier) -> Reconciliation:
    return reconcile_by_reference("shipment", business_ref, carrier.find_shipments)


def _ship(case: Case, request: ActionRequest, carrier: Carrier) -> EffectResult:
    shipment = ShipmentRequest(
        case_id=case.case_id,
        business_ref=request.reference,
        address=case.shipment.address.model_dump(mode="json"),
        sku=case.reserve.sku,
        quantity=case.reserve.quantity,
    )
    return dispatch(request, lambda: carrier.create_shipment(shipment), shipment_error)


def shipment_error(key: str, exc: DownstreamError, *, business_ref: str) -> SagaError:
    """What the caller knows after a failed carrier call, as the workflow's error type."""
    if isinstance(exc, DownstreamRejected):
        return ShipmentRejected(f"shipment {key} rejected by the carrier: {exc.reason}")
    return unanswered_call_error("shipment", key, exc, business_ref)
