"""What a remote downstream's answer means to the workflow: a port error (saga.ports) as the
error the state machine routes, and a lookup's answer as evidence for the ledger."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from saga.errors import OutcomeUnknown, SagaError, TransientError
from saga.identity import ActionRequest
from saga.ledger import Absent, EffectResult, Found, Reconciliation, Undeterminable
from saga.ports import DownstreamError, DownstreamNotDispatched, Receipt


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


class ExplainError(Protocol):
    def __call__(self, key: str, exc: DownstreamError, *, business_ref: str) -> SagaError: ...


def dispatch(
    request: ActionRequest, call: Callable[[], Receipt], explain: ExplainError
) -> EffectResult:
    """One call to a remote downstream as the ledger's effect: its receipt, or what the caller
    knows after a failed call, as the workflow's error type (`explain`)."""
    try:
        receipt = call()
    except DownstreamError as exc:
        raise explain(request.key, exc, business_ref=request.reference) from exc
    return EffectResult(result=receipt.to_result(), downstream_ref=receipt.downstream_ref)


def reconcile_by_reference(
    what: str, business_ref: str, lookup: Callable[[str], Sequence[Receipt]]
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
        ids = ", ".join(receipt.downstream_ref for receipt in receipts)
        return Undeterminable(f"duplicate {what}s for {business_ref}: {ids}")
    return Found(result=receipts[0].to_result(), downstream_ref=receipts[0].downstream_ref)
