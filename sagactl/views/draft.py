"""A proposed case as `sagactl case approve --case` shows it before it is signed. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def describe_draft(draft: Mapping[str, Any], approver: str) -> list[str]:
    """The draft's parameters, one line each, with the approver about to sign."""
    params = draft["parameters"]
    refund, address = params["refund"], params["shipment"]["address"]
    amount = refund["amount_minor"]
    return [
        f"case {draft['case_id']} (tenant {draft['tenant_id']}), proposed as request "
        f"{draft.get('request_id')} at {draft.get('created_at')}",
        f"  order     {params['order']['order_id']} of customer {params['order']['customer_id']}",
        f"  reserve   {params['reserve']['quantity']} x {params['reserve']['sku']}",
        f"  refund    {amount} minor units of {refund['currency']} "
        f"({amount / 100:.2f} for a 2-decimal currency) on payment {refund['payment_reference']}",
        f"  ship to   {address['name']}, {address['line1']}, {address['postal_code']} "
        f"{address['city']}, {address['country']}",
        f"  digest    {draft['digest']}",
        f"  approver  {approver}",
    ]
