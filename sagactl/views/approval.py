"""What an approver is shown before signing: every consequential parameter, as it will be
signed. Pure.

One rendering for every way a case is approved (`sagactl case approve FILE`, `--case` for a
draft an agent proposed): the parameters the approval digest covers (saga.models.approval_digest),
the revision, the digest and who signs. Amounts are shown exactly as signed, in minor units, and
in major units with the currency's own decimals (saga.formats.major_units: 2000 JPY are 2000
yen, 2000 USD 20.00 dollars, 2000 KWD 2.000 dinars).

Every value shown comes from a file or a drafts table someone else wrote: each passes through
`shown`, so a control character (an escape sequence that would rewrite the terminal, a line
break, a right-to-left override) is displayed as its escape, never acted on by the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.formats import currency_exponent, major_units


def shown(value: object) -> str:
    """`value` as text a terminal displays literally: every character that is not printable
    (str.isprintable: control, format and separator characters other than the space) as its
    Python escape, and a backslash doubled so that an escape cannot be forged."""
    text = str(value)
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(
        char if char.isprintable() and char != "\\" else repr(char)[1:-1] for char in text
    )


def amount_text(amount_minor: int, currency: str) -> str:
    """`2000 minor units of KWD = 2.000 KWD (3 decimals)`."""
    exponent = currency_exponent(currency)
    decimals = f"{exponent} decimal{'' if exponent == 1 else 's'}"
    return (
        f"{shown(amount_minor)} minor units of {shown(currency)} = "
        f"{major_units(amount_minor, currency)} {shown(currency)} ({decimals})"
    )


def parameter_lines(parameters: Mapping[str, Any]) -> list[str]:
    """The consequential parameters of a case (or a draft's `parameters`), one line each."""
    order, reserve = parameters["order"], parameters["reserve"]
    refund, address = parameters["refund"], parameters["shipment"]["address"]
    street = ", ".join(shown(address[field]) for field in ("name", "line1"))
    return [
        f"  order     {shown(order['order_id'])} of customer {shown(order['customer_id'])}",
        f"  reserve   {shown(reserve['quantity'])} x {shown(reserve['sku'])}",
        f"  refund    {amount_text(refund['amount_minor'], refund['currency'])} on payment "
        f"{shown(refund['payment_reference'])}",
        f"  ship to   {street}, {shown(address['postal_code'])} {shown(address['city'])}, "
        f"{shown(address['country'])}",
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
        f"  digest    {shown(digest)}",
        f"  approver  {shown(approver)}",
    ]
    if start_by:
        lines.append(f"  start by  {shown(start_by)}")
    return lines


def describe_case(case: Mapping[str, Any], *, start_by: str | None = None) -> list[str]:
    """A case file about to be signed (its approval digest filled in)."""
    approval = case["approval"]
    return approval_lines(
        f"case {shown(case['case_id'])} (tenant {shown(case['tenant_id'])})",
        case,
        revision=int(approval["revision"]),
        digest=str(approval["digest"]),
        approver=str(approval["approved_by"]),
        start_by=start_by,
    )


def describe_draft(draft: Mapping[str, Any], approver: str) -> list[str]:
    """A draft an agent proposed, with the approver about to sign it."""
    return approval_lines(
        f"case {shown(draft['case_id'])} (tenant {shown(draft['tenant_id'])}), proposed as "
        f"request {shown(draft.get('request_id'))} at {shown(draft.get('created_at'))}",
        draft["parameters"],
        revision=int(draft.get("revision", 1)),
        digest=str(draft["digest"]),
        approver=approver,
    )
