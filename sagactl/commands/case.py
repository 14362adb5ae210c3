"""`sagactl case new|approve|check`: write, approve and check case files.

The approval digest covers the case's consequential parameters and the approved revision
(`saga.models.approval_digest`); `sandbox.faults` is never digested. Every command checks a case
as ValidateCase does, with the same code: the fields, the tenant and its approver, the digest.
Who may approve for which tenant is read from cdk.json's `tenants`, the configuration `cdk
deploy` and `sagactl local up` give ValidateCase. A stack deployed with another `-c
tenants=...` has other tenants: --deployed reads the approvers of the deployed ValidateCase
function instead (the stack of --stack, or the local AWS with --local). `approve --case CASE_ID`
approves a case an agent proposed (`sagactl mcp`) where it is stored, the drafts table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from saga.errors import ApprovalInvalid, AuthorizationDenied
from saga.fault_plan import DOWNSTREAMS
from saga.models import Case, parse_case
from saga.tools.validate import authorize
from sagactl.commands import summary
from sagactl.commands.case_approve import (
    NO_TERMINAL_RULE,
    approval_summary,
    command_approve,
    with_digest,
    write_case,
)
from sagactl.commands.common import (
    Subparsers,
    add_command,
    add_json_argument,
    add_target_arguments,
    check_case_file,
    positive_int,
    read_case_file,
    resolve_target,
)
from sagactl.commands.render import emit_json
from sagactl.config import Tenants, configured_tenants
from sagactl.errors import InvalidCaseFile, UsageError
from sagactl.operations.functions import deployed_tenants
from sagactl.operations.signing import verify_deployed_signature
from sagactl.paths import LOCAL_STATE_DIR
from sagactl.views.untrusted import visible


def tenants_for(args: argparse.Namespace) -> Tenants:
    """cdk.json's tenants, or with --deployed the deployed ValidateCase function's."""
    if not args.deployed:
        return configured_tenants()
    return deployed_tenants(resolve_target(args))


def check_authorized(case: Case, tenants: Tenants, *, source: str) -> None:
    """ValidateCase's own rule (saga.tools.validate.authorize) against `tenants`."""
    try:
        authorize(case, tenants.approvers)
    except AuthorizationDenied as exc:
        raise InvalidCaseFile(f"{source}: {exc} ({tenants.configured(case.tenant_id)})") from None


def parse_faults(specs: list[str]) -> dict[str, list[str]]:
    """`refund=lose_response` (repeatable, in order) -> {"refund": ["lose_response"], ...}."""
    faults: dict[str, list[str]] = {downstream: [] for downstream in DOWNSTREAMS}
    for spec in specs:
        downstream, sep, name = spec.partition("=")
        if not sep or not downstream or not name:
            raise UsageError(
                f"--fault {spec!r}: expected DOWNSTREAM=FAULT, e.g. refund=lose_response"
            )
        faults.setdefault(downstream.strip(), []).append(name.strip())
    return faults


def case_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "case_id": args.case_id,
        "tenant_id": args.tenant,
        "order": {"order_id": args.order_id, "customer_id": args.customer_id},
        "reserve": {"sku": args.sku, "quantity": args.quantity},
        "refund": {
            "payment_reference": args.payment_reference,
            "amount_minor": args.amount_minor,
            "currency": args.currency,
        },
        "shipment": {
            "address": {
                "name": args.address_name,
                "line1": args.address_line1,
                "city": args.address_city,
                "postal_code": args.address_postal_code,
                "country": args.address_country,
            }
        },
        "approval": {"revision": args.revision, "approved_by": args.approved_by},
        "sandbox": {"faults": parse_faults(args.fault)},
    }


def approve(case: Any, tenants: Tenants, *, source: str) -> dict[str, Any]:
    """The case with its approval digest filled in; InvalidCaseFile names the bad field, or the
    tenant or approver ValidateCase would refuse."""
    approved = with_digest(case, source=source)
    check_authorized(parse_case(approved), tenants, source=source)
    return approved


def command_new(args: argparse.Namespace) -> int:
    case = approve(case_from_args(args), tenants_for(args), source="case")
    # By default under .local/ (ignored by git), not the working directory.
    output = args.output or str(LOCAL_STATE_DIR / f"{case['case_id']}.json")
    written_to = write_case(case, output, force=args.force)
    summary = approval_summary(case, written_to)
    if output == "-":
        return 0
    if args.json:
        emit_json(summary)
    else:
        print(
            visible(
                f"wrote case {case['case_id']} to {written_to} (digest {summary['digest']}); "
                f"an approver signs it with: sagactl case approve {written_to}"
            )
        )
    return 0


def command_check(args: argparse.Namespace) -> int:
    raw = read_case_file(args.file)
    tenants = tenants_for(args)
    case = check_case_file(raw, tenants, str(args.file))
    signature = "signed (the signature is verified with the deployed keys: --deployed)"
    if args.deployed:  # the last check, as in ValidateCase
        try:
            signature = verify_deployed_signature(resolve_target(args), case)
        except (ApprovalInvalid, AuthorizationDenied) as exc:
            raise InvalidCaseFile(f"{args.file}: {exc}") from None
    if args.json:
        emit_json(
            {
                "file": str(args.file),
                "case_id": case.case_id,
                "valid": True,
                "tenants_from": tenants.source,
                "signature_verified": bool(args.deployed),
            }
        )
    else:
        print(
            visible(
                f"{args.file}: case {case.case_id} is valid, {case.approval.approved_by} may "
                f"approve for tenant {case.tenant_id} ({tenants.source}), the approval digest "
                f"matches and it is {signature}"
            )
        )
    return 0


def _add_tenant_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deployed",
        action="store_true",
        help="check the tenant and approver against the deployed ValidateCase function's "
        "approval keys (of --stack, or the local AWS) instead of cdk.json",
    )
    add_target_arguments(parser)


def register(subparsers: Subparsers) -> None:
    case = add_command(subparsers, "case", summary("case"), doc=__doc__)
    commands = case.add_subparsers(dest="case_command", metavar="SUBCOMMAND", required=True)

    new = add_command(
        commands,
        "new",
        "write an approved case file from flags",
        handler=command_new,
        description="Write a case file with its approval digest filled in, checked as "
        "ValidateCase checks it (fields, tenant and approver). Refuses an invalid case with a "
        "message naming the field, and writes nothing.",
    )
    required = new.add_argument_group("case (all required)")
    for flag, help_text in (
        ("--case-id", "the case id; also the execution name of revision 1"),
        ("--tenant", "tenant id (who the case belongs to)"),
        ("--order-id", "the order being replaced"),
        ("--customer-id", "the customer"),
        ("--sku", "the SKU to reserve and ship"),
        ("--payment-reference", "the payment to refund"),
        ("--currency", "ISO 4217 code, e.g. USD"),
        ("--address-name", "ship to: name"),
        ("--address-line1", "ship to: street"),
        ("--address-city", "ship to: city"),
        ("--address-postal-code", "ship to: postal code"),
        ("--address-country", "ship to: ISO 3166 alpha-2, e.g. US"),
        ("--approved-by", "the approver (must be allowed for the tenant)"),
    ):
        required.add_argument(flag, required=True, help=help_text)
    required.add_argument("--quantity", type=int, required=True, help="units to reserve and ship")
    required.add_argument(
        "--amount-minor", type=int, required=True, help="refund amount in minor units (cents)"
    )
    new.add_argument(
        "--revision",
        type=positive_int,
        default=1,
        help="approved revision (1); a revision > 1 starts as execution <case id>--r<revision>",
    )
    new.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="DOWNSTREAM=FAULT",
        help="sandbox fault, repeatable, consumed in order per downstream "
        f"({', '.join(DOWNSTREAMS)}), e.g. refund=lose_response",
    )
    new.add_argument(
        "-o",
        "--output",
        help="file to write (default: .local/<case id>.json in the clone; - for stdout)",
    )
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    add_json_argument(new)
    _add_tenant_source(new)

    approve_parser = add_command(
        commands,
        "approve",
        "approve a case file: fill in its digest and sign it with the approver's key",
        handler=command_approve,
        description="Validate the case's fields, fill in approval.digest (sha256 of the "
        "approved parameters and revision) and sign the approval with the approver's KMS key "
        "(the stack's ApprovalKeys output), with your credentials: on AWS only the approver's "
        "role or principal may sign, and CloudTrail records who did; against the local AWS "
        "(the environment `sagactl local up` prints) anyone may. Shows every parameter it signs "
        "first (the refund in minor units and in the currency's major units) and asks, at a "
        f"terminal, unless --yes; {NO_TERMINAL_RULE}. Writes signed_at, key_id and "
        "signature into the file, or into --output. A case ValidateCase rejected is corrected, "
        "then approved again with the next --revision: it starts under its own execution name. "
        "--case CASE_ID approves a case an agent proposed (`sagactl mcp`) where it is stored: "
        "its parameters are shown and confirmed, the approval is signed the same way and stored "
        "on the draft (once, and only on the draft as shown); the agent then starts it.",
    )
    approve_parser.add_argument("file", type=Path, nargs="?", help="the case file")
    approve_parser.add_argument(
        "--case",
        metavar="CASE_ID",
        help="approve the draft an agent proposed (the drafts table): shows its parameters, "
        "asks for confirmation, signs, stores the approval on the draft",
    )
    approve_parser.add_argument(
        "--yes",
        action="store_true",
        help=f"do not ask for confirmation; {NO_TERMINAL_RULE}",
    )
    approve_parser.add_argument(
        "--as",
        "--approved-by",
        dest="approved_by",
        metavar="APPROVER",
        help="approve as this approver (default: the file's approval.approved_by)",
    )
    approve_parser.add_argument("--revision", type=positive_int, help="set approval.revision")
    approve_parser.add_argument(
        "--start-by",
        metavar="TIME",
        help="the case must start before this ISO 8601 time (checked when it starts only; "
        "compensations and redrives later are never refused for it)",
    )
    approve_parser.add_argument("-o", "--output", help="write here instead (- for stdout)")
    add_json_argument(approve_parser)
    add_target_arguments(approve_parser)

    check = add_command(
        commands,
        "check",
        "validate a case file and verify its approval digest",
        handler=command_check,
        description="Check a case file as ValidateCase will: its fields, that the tenant is "
        "configured and the approver may approve for it, and that approval.digest matches the "
        "parameters. Exit 0 when it would be accepted, 2 (with the reason) when not.",
    )
    check.add_argument("file", type=Path, help="the case file")
    add_json_argument(check)
    _add_tenant_source(check)
