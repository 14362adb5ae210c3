"""What ValidateCase refuses for the deployment's payment provider (docs/design.md §8).

Where refunds go to Stripe, a case Stripe could not refund exactly must be refused before the
reservation, not by Stripe after it: its amount has no exact Stripe amount (stripe_currencies),
its `payment_reference` names neither a PaymentIntent (`pi_...`) nor a Charge (`ch_...`), it
asks for refund faults where nobody acts them out (Stripe's own API; only the local Stripe
server does, at STRIPE_API_BASE: local_aws.stripe), or for any fault where the sandbox is
not deployed. (Where refunds go to the sandbox's provider,
saga.fault_plan.check_sandbox_faults refuses the faults only the local Stripe server acts out.)
Each is an InvalidRequest naming the field and what to do; nothing is rewritten. No SDK here:
ValidateCase never imports it.
"""

from __future__ import annotations

from typing import Final

from saga.errors import InvalidRequest
from saga.models import Case
from saga.providers.stripe_currencies import UnrepresentableAmount, to_stripe_amount

# The payment a refund names, by the reference's prefix -> the refund's parameter.
PAYMENT_PARAMETERS: Final = {"pi_": "payment_intent", "ch_": "charge"}
REFUND_DOWNSTREAM: Final = "refund"  # the sandbox's name for the payment provider's faults


def payment_parameter(reference: str) -> str | None:
    """`payment_intent` or `charge` for a Stripe payment reference (None: neither)."""
    for prefix, parameter in PAYMENT_PARAMETERS.items():
        if reference.startswith(prefix) and len(reference) > len(prefix):
            return parameter
    return None


def check_stripe_case(case: Case, *, sandbox_deployed: bool, local_server: bool = False) -> None:
    """Refuse a case Stripe cannot refund exactly as approved (InvalidRequest); `local_server`:
    refunds go to a Stripe-compatible server other than Stripe's (STRIPE_API_BASE), the local
    one, which acts out the case's refund faults."""
    refund = case.refund
    if payment_parameter(refund.payment_reference) is None:
        raise InvalidRequest(
            f"case {case.case_id}: refund.payment_reference {refund.payment_reference!r} names "
            "no Stripe payment: refunds go to Stripe here, so give the PaymentIntent (pi_...) "
            "or the Charge (ch_...) the customer paid with, and approve the case again"
        )
    try:
        to_stripe_amount(refund.amount_minor, refund.currency)
    except UnrepresentableAmount as exc:
        raise InvalidRequest(f"case {case.case_id}: refund.amount_minor: {exc}") from None
    faults = {name: entries for name, entries in case.sandbox.faults.items() if entries}
    if not sandbox_deployed and faults:
        raise InvalidRequest(
            f"case {case.case_id}: sandbox.faults {sorted(faults)}: this deployment has no "
            "sandbox (refunds go to Stripe); remove sandbox.faults"
        )
    if faults.get(REFUND_DOWNSTREAM) and not local_server:
        raise InvalidRequest(
            f"case {case.case_id}: sandbox.faults.refund: refunds go to Stripe here, which acts "
            "out no sandbox fault (only the local Stripe server of `sagactl local up --payments "
            "stripe` does); remove sandbox.faults.refund"
        )
