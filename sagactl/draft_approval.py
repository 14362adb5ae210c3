"""`sagactl case approve --case CASE_ID`: a person approves a case an agent proposed, where it
is stored (the drafts table, saga.agent.drafts; docs/design.md §10).

The draft's parameters are shown first and confirmed (unless --yes); the approval is signed
exactly as `sagactl case approve FILE` signs a file (sagactl.signing.sign_case: KMS Sign with
the approver's key and the caller's credentials), then stored on the draft with one
conditional write: only if the draft still has the digest that was shown and no approval yet.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from saga.agent.drafts import DraftConflict, DraftStore, draft_case
from saga.models import approval_digest
from sagactl.agent_server import drafts_table
from sagactl.errors import EXIT_REFUSED, NotFound, SagactlError, UsageError
from sagactl.render import emit_json
from sagactl.signing import APPROVAL_KEYS_OUTPUT, _json_output, sign_case
from sagactl.target import Target, resolve_target


class ApprovalRefused(SagactlError):
    """The draft is approved already, or changed since it was shown: nothing stored."""

    exit_code = EXIT_REFUSED


def default_approver(target: Target, tenant: str) -> str:
    """The tenant's approver when it has exactly one in this stack; else --as is needed."""
    approvers = sorted((_json_output(target, APPROVAL_KEYS_OUTPUT).get(tenant) or {}).keys())
    if len(approvers) != 1:
        raise UsageError(
            f"tenant {tenant!r} has approvers {', '.join(approvers) or 'none'} in this stack: "
            "say which one you are with --as APPROVER"
        )
    return str(approvers[0])


def describe_draft(draft: dict[str, Any], approver: str) -> list[str]:
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


def approve_draft(args: argparse.Namespace) -> int:
    if args.revision or args.output:
        raise UsageError("--revision and --output apply to files: a draft is approved as proposed")
    target = resolve_target(args)
    store = DraftStore(target.client("dynamodb"), drafts_table(target))
    draft = store.get(args.case)
    if draft is None:
        raise NotFound(f"no proposed case {args.case} in the drafts table")
    if draft.get("approval"):
        raise ApprovalRefused(
            f"case {args.case} was approved already by {draft['approval'].get('approved_by')} "
            f"at {draft.get('approved_at')}; nothing changed"
        )
    approver = args.approved_by or default_approver(target, str(draft["tenant_id"]))
    if not args.json:
        print("\n".join(describe_draft(draft, approver)))
    if not args.yes and not _confirmed():
        print("not approved: nothing signed or stored")
        return EXIT_REFUSED
    case = draft_case(draft)
    case["approval"] = {"revision": case["approval"]["revision"], "approved_by": approver}
    if approval_digest(case) != draft["digest"]:
        raise SagactlError(f"case {args.case}: the draft's digest does not match its parameters")
    start_by = None
    if args.start_by:
        from sagactl.commands.case import _instant

        start_by = _instant(args.start_by, "--start-by")
    now = datetime.fromtimestamp(target.now(), UTC)
    signed = sign_case(target, case, now=now, start_by=start_by)
    try:
        store.approve(args.case, digest=draft["digest"], approval=signed["approval"])
    except DraftConflict as exc:
        raise ApprovalRefused(f"{exc}; nothing stored") from None
    approval = signed["approval"]
    if args.json:
        emit_json({"case_id": args.case, "approved": True, **approval})
    else:
        print(
            f"approved case {args.case} revision {approval['revision']} as {approver}, signed "
            f"with {approval['key_id']}: {approval['digest']}; the agent can start it now "
            "(start_replacement)"
        )
    return 0


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        raise UsageError("cannot ask for confirmation without a terminal: pass --yes")
    answer = input("approve and sign this case? [y/N] ")
    return answer.strip().lower() in {"y", "yes"}
