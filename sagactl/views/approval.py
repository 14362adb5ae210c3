"""What an approver is shown before signing: every consequential parameter, as it will be
signed. Pure.

One rendering for every way a case is approved (`sagactl case approve FILE`, `--case` for a
draft an agent proposed): the parameters the approval digest covers (saga.models.approval_digest),
the revision, the digest and who signs; above a four-eyes threshold (saga.four_eyes), how many
distinct approvers the case needs and why, who signed it already, and how many are still needed
once this signature is added. Amounts are shown exactly as signed, in minor units, and
in major units with the currency's own decimals (saga.formats.major_units: 2000 JPY are 2000
yen, 2000 USD 20.00 dollars, 2000 KWD 2.000 dinars).

Every value shown comes from a file or a drafts table someone else wrote: each passes through
`shown`, so a control character (an escape sequence that would rewrite the terminal, a line
break, a right-to-left override) is displayed as its escape, never acted on by the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from saga.formats import currency_exponent, major_units
from saga.four_eyes import ONE_APPROVER, progress_text


@dataclass(frozen=True)
class Signing:
    """Four eyes (docs/design.md §9) as the approver is shown it: how many distinct approvers
    the case needs and why, and who signed it already (approver, signed_at)."""

    required: int
    why: str
    signed: Sequence[tuple[str, str]] = field(default_factory=tuple)

    def shown(self) -> bool:
        """Only where four eyes applies or someone signed: a one-approver case reads as ever."""
        return self.required > ONE_APPROVER or bool(self.signed)

    def after(self, approver: str) -> int:
        """Distinct approvers once `approver` has signed."""
        return len({name for name, _ in self.signed} | {approver})


def still_needed(given: int, required: int) -> str:
    """`1 of 2 approvals: one more approver of the tenant must sign` or `... : it can start`."""
    missing = required - given
    if missing <= 0:
        return f"{progress_text(given, required)}: it can start"
    more = "one more approver" if missing == 1 else f"{missing} more approvers"
    return f"{progress_text(given, required)}: {more} of the tenant must sign"


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
    signing: Signing | None = None,
) -> list[str]:
    """What the approver signs: the heading, the parameters, the revision, the digest, who;
    with four eyes, who signed already and what this signature makes of it."""
    lines = [heading, *parameter_lines(parameters)]
    lines += [
        f"  revision  {revision}",
        f"  digest    {shown(digest)}",
        f"  approver  {shown(approver)}",
    ]
    if start_by:
        lines.append(f"  start by  {shown(start_by)}")
    if signing is not None and signing.shown():
        lines.append(f"  approvals {signing.required} from distinct approvers ({signing.why})")
        lines += [f"  signed    by {shown(name)} at {shown(at)}" for name, at in signing.signed]
        lines.append(f"  with you  {still_needed(signing.after(approver), signing.required)}")
    return lines


def describe_case(
    case: Mapping[str, Any],
    *,
    start_by: str | None = None,
    approver: str | None = None,
    signing: Signing | None = None,
) -> list[str]:
    """A case file about to be signed (its approval digest filled in) by `approver` (default:
    its approval's approver)."""
    approval = case["approval"]
    return approval_lines(
        f"case {shown(case['case_id'])} (tenant {shown(case['tenant_id'])})",
        case,
        revision=int(approval["revision"]),
        digest=str(approval["digest"]),
        approver=approver or str(approval["approved_by"]),
        start_by=start_by,
        signing=signing,
    )


def describe_draft(
    draft: Mapping[str, Any], approver: str, signing: Signing | None = None
) -> list[str]:
    """A draft an agent proposed, with the approver about to sign it."""
    return approval_lines(
        f"case {shown(draft['case_id'])} (tenant {shown(draft['tenant_id'])}), proposed as "
        f"request {shown(draft.get('request_id'))} at {shown(draft.get('created_at'))}",
        draft["parameters"],
        revision=int(draft.get("revision", 1)),
        digest=str(draft["digest"]),
        approver=approver,
        signing=signing,
    )
