"""IssueRefund: a refund through the PaymentProvider port, guarded by the ledger.

The action key goes to the provider as its idempotency key, so a repeat inside the provider's
key retention is one refund. After any uncertain delivery the ledger looks the refund up by
business reference (the action id) before anything is sent again; "not found" allows a repeat
only while the provider still deduplicates the key, since a request in flight may still commit.

Under a daily refund ceiling (`charge`, docs/design.md §3.12) the refund's first claim charges
its tenant's counter for the day in the same transaction; a refund the ceiling refuses is
RefundLimitReached, recorded and replayed like the provider's refusal.
"""

from __future__ import annotations

from saga.ceilings import DailyCharge
from saga.errors import OutcomeUnknown, RefundRejected, SagaError
from saga.identity import ActionRequest, Operation, action_request
from saga.ledger import ActionLedger, Attempt, EffectResult, Reconciliation
from saga.models import Case, StepResult
from saga.ports import DownstreamError, DownstreamKeyMismatch, DownstreamRejected
from saga.ports.payments import PaymentProvider, RefundRequest
from saga.tools.downstream import dispatch, reconcile_by_reference, unanswered_call_error


def issue_refund(
    case: Case,
    attempt: Attempt,
    *,
    execution_arn: str | None,
    ledger: ActionLedger,
    provider: PaymentProvider,
    charge: DailyCharge | None = None,
) -> StepResult:
    request = action_request(case, Operation.REFUND, execution_arn=execution_arn)
    outcome = ledger.execute(
        request,
        attempt,
        effect=lambda: _refund(case, request, provider),
        reconcile=lambda: reconcile_refund(request.reference, provider),
        reattempt_window_seconds=provider.idempotency_window_seconds,
        charge=charge,
    )
    return StepResult.of(outcome)


def reconcile_refund(business_ref: str, provider: PaymentProvider) -> Reconciliation:
    return reconcile_by_reference("refund", business_ref, provider.find_refunds)


def _refund(case: Case, request: ActionRequest, provider: PaymentProvider) -> EffectResult:
    refund = RefundRequest(
        case_id=case.case_id,
        business_ref=request.reference,
        payment_reference=case.refund.payment_reference,
        amount_minor=case.refund.amount_minor,
        currency=case.refund.currency,
    )
    return dispatch(
        request, lambda: provider.refund(refund, idempotency_key=request.key), refund_error
    )


def refund_error(key: str, exc: DownstreamError, *, business_ref: str) -> SagaError:
    """What the caller knows after a failed refund call, as the workflow's error type."""
    if isinstance(exc, DownstreamRejected):
        return RefundRejected(f"refund {key} rejected by the payment provider: {exc.reason}")
    if isinstance(exc, DownstreamKeyMismatch):
        # Not raised as KeyConflict: inside the ledger's effect any non-ledger error becomes
        # UNKNOWN anyway, and that is the truth here (a refund under this key may exist).
        return OutcomeUnknown(
            f"refund {key}: the provider holds this idempotency key for other parameters; "
            "reconcile by business reference"
        )
    # A 409 "in progress" (DownstreamConflict) is unknown: the request in flight may commit.
    return unanswered_call_error("refund", key, exc, business_ref)
