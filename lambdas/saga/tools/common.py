"""What every tool shares: action requests per step, attempts, results and the case record.

The action identity of every step comes from the case alone (design.md §2): `<case_id>.<op>`
under the case's tenant, and the release of a reservation reuses the reserve action's id under
its own operation. The request digest covers the step's consequential parameters plus the
approved revision, so the same key with other parameters is a KeyConflict in the ledger.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from saga.adapters.errors import DownstreamError, DownstreamNotDispatched
from saga.errors import OutcomeUnknown, SagaError, TransientError
from saga.identity import (
    Operation,
    action_id_for,
    action_key,
    compensation_action_id,
    request_digest,
)
from saga.ledger import (
    Absent,
    ActionOutcome,
    ActionRequest,
    Attempt,
    Found,
    Reconciliation,
    Undeterminable,
)
from saga.models import ActionRef, AttemptInfo, Case, CaseActions, StepResult

if TYPE_CHECKING:
    pass

Clock = Callable[[], float]

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


class FaultSource(Protocol):
    """The sandbox's fault cursor for one downstream of one case (saga.sandbox.faults)."""

    def next(self) -> str | None: ...


class NoFaults:
    """A downstream without injected faults (a real provider, or a case without `sandbox`)."""

    def next(self) -> str | None:
        return None


def next_fault(faults: FaultSource, *, action: str) -> str | None:
    """This call's sandbox fault, drawn before anything is written. The cursor is a DynamoDB
    item: a throttled or conflicting read of it is a TransientError (nothing was sent, the step
    is retried), as the sandbox providers treat it (saga.sandbox._common.draw_fault)."""
    try:
        return faults.next()
    except (BotoCoreError, ClientError) as exc:
        raise TransientError(
            f"{action}: sandbox control unavailable, nothing written ({exc})"
        ) from exc


# --- identity -----------------------------------------------------------------------------------
def step_parameters(case: Case, operation: Operation) -> dict[str, Any]:
    """The consequential parameters of one action: what the digest and the approval cover."""
    if operation is Operation.RESERVE:
        return {"sku": case.reserve.sku, "quantity": case.reserve.quantity}
    if operation is Operation.REFUND:
        return {
            "order_id": case.order.order_id,
            "payment_reference": case.refund.payment_reference,
            "amount_minor": case.refund.amount_minor,
            "currency": case.refund.currency,
        }
    if operation is Operation.SHIP:
        return {
            "order_id": case.order.order_id,
            "address": case.shipment.address.model_dump(mode="json"),
            "sku": case.reserve.sku,
            "quantity": case.reserve.quantity,
        }
    return {
        "reservation_id": reserve_key(case),
        "sku": case.reserve.sku,
        "quantity": case.reserve.quantity,
    }


def reserve_key(case: Case) -> str:
    """The reserve action's key, which is also the reservation item's id."""
    return action_key(
        case.tenant_id, Operation.RESERVE, action_id_for(case.case_id, Operation.RESERVE)
    )


def action_request(
    case: Case, operation: Operation, *, execution_arn: str | None = None
) -> ActionRequest:
    """The ledger request of one action of the case."""
    if operation is Operation.RELEASE:
        reserve_id = action_id_for(case.case_id, Operation.RESERVE)
        return ActionRequest(
            tenant_id=case.tenant_id,
            operation=Operation.RELEASE.value,
            action_id=compensation_action_id(reserve_id),
            digest=request_digest(step_parameters(case, operation), case.approval.revision),
            case_id=case.case_id,
            execution_arn=execution_arn,
            compensates=reserve_key(case),
        )
    return ActionRequest(
        tenant_id=case.tenant_id,
        operation=operation.value,
        action_id=action_id_for(case.case_id, operation),
        digest=request_digest(step_parameters(case, operation), case.approval.revision),
        case_id=case.case_id,
        execution_arn=execution_arn,
    )


def case_actions(case: Case) -> CaseActions:
    refs = {
        operation.value: ActionRef(
            action_id=(request := action_request(case, operation)).action_id,
            action_key=request.key,
        )
        for operation in Operation
    }
    return CaseActions(
        reserve=refs["reserve"], refund=refs["refund"], ship=refs["ship"], release=refs["release"]
    )


# --- messages -----------------------------------------------------------------------------------
def downstream_detail(message: str, business_ref: str) -> str:
    """What a downstream said, without its own "<call> <reference>: " prefix.

    The tool's message already names the action, so "refund K: outcome unknown: refund R: the
    response was lost" reads as "refund K: outcome unknown: the response was lost".
    """
    head, separator, rest = message.partition(f"{business_ref}: ")
    if separator and rest and ":" not in head:
        return rest
    return message


def unanswered_call_error(
    what: str, key: str, exc: DownstreamError, business_ref: str
) -> SagaError:
    """A downstream call that neither succeeded nor was refused, as the workflow's error type:
    not dispatched (nothing happened, or the key makes a repeat one effect) is safe to repeat;
    anything else may have happened and goes to reconciliation."""
    detail = downstream_detail(exc.message, business_ref)
    if isinstance(exc, DownstreamNotDispatched):
        return TransientError(f"{what} {key} not dispatched: {detail}")
    return OutcomeUnknown(f"{what} {key}: outcome unknown: {detail}")


# --- reconciliation by business reference -------------------------------------------------------
class Receipt(Protocol):
    def to_result(self) -> dict[str, Any]: ...


ReceiptT = TypeVar("ReceiptT", bound=Receipt)


def reconcile_by_reference(
    what: str,
    business_ref: str,
    lookup: Callable[[str], Sequence[ReceiptT]],
    id_of: Callable[[ReceiptT], str],
) -> Reconciliation:
    """The downstream's answer for one business reference, as evidence for the ledger.

    Exactly one effect is Found; none is Absent (the same key may be re-attempted); no answer,
    or more than one effect for one reference, is Undeterminable: a person has to look.
    """
    try:
        receipts = lookup(business_ref)
    except DownstreamError as exc:
        return Undeterminable(
            f"{what} lookup for {business_ref} got no answer: "
            f"{downstream_detail(exc.message, business_ref)}"
        )
    if not receipts:
        return Absent()
    if len(receipts) > 1:
        ids = ", ".join(id_of(receipt) for receipt in receipts)
        return Undeterminable(f"duplicate {what}s for {business_ref}: {ids}")
    return Found(result=receipts[0].to_result(), downstream_ref=id_of(receipts[0]))


# --- attempts and results -----------------------------------------------------------------------
def make_attempt(info: AttemptInfo, request_id: str, remaining_millis: int) -> Attempt:
    """One delivery: the lease owner id, the time it has left (which sizes the lease) and when
    its execution started."""
    return Attempt(
        attempt_id=info.attempt_id(request_id),
        remaining_seconds=max(remaining_millis, 0) / 1000,
        execution_started_at=_epoch(info.started),
    )


def _epoch(timestamp: str | None) -> float | None:
    """`$states.context.Execution.StartTime` (ISO 8601) as epoch seconds; None if absent."""
    if timestamp is None:
        return None
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return None  # not worth failing a delivery over: the age rule just does not apply
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def step_result(outcome: ActionOutcome) -> StepResult:
    return StepResult(
        action_key=outcome.action_key,
        status="COMPLETED",
        downstream_ref=outcome.downstream_ref,
        result=outcome.result,
        replayed=outcome.replayed,
        reconciled=outcome.reconciled,
        attempts=outcome.attempts,
    )


# --- DynamoDB items ----------------------------------------------------------------------------
def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A plain JSON-able mapping in DynamoDB's low-level format (floats are not accepted)."""
    return {name: _SERIALIZER.serialize(value) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _plain(_DESERIALIZER.deserialize(value)) for name, value in item.items()}


def _plain(value: Any) -> Any:
    """Decimals back to ints (every number we store is an integer count or epoch second)."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | set | tuple):
        return [_plain(item) for item in value]
    return value


def now_iso(clock: Clock) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
