"""What an approver is shown before signing: every consequential parameter, as it will be
signed. Pure.

One rendering for every way a case is approved (`sagactl case approve FILE`, `--case` for a
draft an agent proposed): the parameters the approval digest covers (saga.models.approval_digest),
the revision, the digest and who signs. Amounts are shown exactly as signed, in minor units, and
in major units with the currency's own decimals (saga.formats.major_units: 2000 JPY are 2000
yen, 2000 USD 20.00 dollars, 2000 KWD 2.000 dinars).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.formats import currency_exponent, major_units


def amount_text(amount_minor: int, currency: str) -> str:
    """`2000 minor units of KWD = 2.000 KWD (3 decimals)`."""
    exponent = currency_exponent(currency)
    decimals = f"{exponent} decimal{'' if exponent == 1 else 's'}"
    return (
        f"{amount_minor} minor units of {currency} = {major_units(amount_minor, currency)} "
        f"{currency} ({decimals})"
    )


def parameter_lines(parameters: Mapping[str, Any]) -> list[str]:
    """The consequential parameters of a case (or a draft's `parameters`), one line each."""
    order, reserve = parameters["order"], parameters["reserve"]
    refund, address = parameters["refund"], parameters["shipment"]["address"]
    return [
        f"  order     {order['order_id']} of customer {order['customer_id']}",
        f"  reserve   {reserve['quantity']} x {reserve['sku']}",
        f"  refund    {amount_text(refund['amount_minor'], refund['currency'])} on payment "
        f"{refund['payment_reference']}",
        f"  ship to   {address['name']}, {address['line1']}, {address['postal_code']} "
        f"{address['city']}, {address['country']}",
    ]


def approval_lines(
    heading: str,
    parameters: Mapping[str, Any],
    *,
    revision: int,
    digest: str,
    approver: str,
    start_by: str | None = None,
) -> list[str]:
    """What the approver signs: the heading, the parameters, the revision, the digest, who."""
    lines = [heading, *parameter_lines(parameters)]
    lines += [
        f"  revision  {revision}",
        f"  digest    {digest}",
        f"  approver  {approver}",
    ]
    if start_by:
        lines.append(f"  start by  {start_by}")
    return lines


def describe_case(case: Mapping[str, Any], *, start_by: str | None = None) -> list[str]:
    """A case file about to be signed (its approval digest filled in)."""
    approval = case["approval"]
    return approval_lines(
        f"case {case['case_id']} (tenant {case['tenant_id']})",
        case,
        revision=int(approval["revision"]),
        digest=str(approval["digest"]),
        approver=str(approval["approved_by"]),
        start_by=start_by,
    )


def describe_draft(draft: Mapping[str, Any], approver: str) -> list[str]:
    """A draft an agent proposed, with the approver about to sign it."""
    return approval_lines(
        f"case {draft['case_id']} (tenant {draft['tenant_id']}), proposed as request "
        f"{draft.get('request_id')} at {draft.get('created_at')}",
        draft["parameters"],
        revision=int(draft.get("revision", 1)),
        digest=str(draft["digest"]),
        approver=approver,
    )
