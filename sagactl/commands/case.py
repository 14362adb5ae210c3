"""`sagactl case new|approve|check`: write, approve and check case files.

The approval digest covers the case's consequential parameters and the approved revision
(`saga.models.approval_digest`); `sandbox.faults` is never digested. Every command checks a case
as ValidateCase does, with the same code: the fields, the tenant and its approver, the digest.
Who may approve for which tenant is read from cdk.json's `tenants`, the configuration `cdk
deploy` and `sagactl local up` give ValidateCase (its TENANTS). A stack deployed with another
`-c tenants=...` has other tenants: --deployed reads the TENANTS of the deployed ValidateCase
function instead (the stack of --stack, or the local AWS with --local).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from saga.approvals import (
    ApprovalVerifier,
    KmsPublicKeys,
    format_instant,
    require_signature,
)
from saga.errors import ApprovalInvalid, ApprovalMismatch, AuthorizationDenied, InvalidRequest
from saga.fault_plan import DOWNSTREAMS
from saga.models import Case, parse_case, verify_approval, with_approval_digest
from saga.settings import ConfigurationError, parse_approval_keys, parse_tenants
from saga.tools.validate import authorize
from sagactl.commands.common import (
    Subparsers,
    add_json_argument,
    cdk_config,
    positive_int,
    read_case_file,
    stack_function,
    write_json_file,
)
from sagactl.errors import InvalidCaseFile, SagactlError, UsageError, guarded
from sagactl.render import emit_json
from sagactl.signing import sign_case
from sagactl.target import Target, add_target_arguments, resolve_target

# The Handler of ValidateCaseFunction (stacks/constructs/tools.py TOOL_SPECS).
VALIDATE_CASE_HANDLER = "saga.handlers.validate_case.handler"


@dataclass(frozen=True)
class Tenants:
    """Who may approve cases for which tenant, and where that was read."""

    approvers: Mapping[str, frozenset[str]]
    source: str


def configured_tenants(args: argparse.Namespace) -> Tenants:
    if not args.deployed:
        tenants = cdk_config().tenants
        return Tenants({t: frozenset(a) for t, a in tenants.items()}, "cdk.json")
    name, variables = _validate_case_environment(resolve_target(args))
    try:
        return Tenants(parse_tenants(str(variables.get("TENANTS") or "")), f"TENANTS of {name}")
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read who may approve from {name}: {exc}") from None


def _validate_case_environment(target: Target) -> tuple[str, dict[str, str]]:
    function = stack_function(
        target, "ValidateCase", VALIDATE_CASE_HANDLER, "CASES_TABLE", "CasesTableName"
    )
    variables = (function.get("Environment") or {}).get("Variables") or {}
    return str(function["FunctionName"]), dict(variables)


def verify_signature(case: Case, args: argparse.Namespace) -> str:
    """ValidateCase's signature check (saga.approvals) with the deployed keys: a sentence on
    success; ApprovalInvalid or AuthorizationDenied as ValidateCase would raise them."""
    target = resolve_target(args)
    name, variables = _validate_case_environment(target)
    try:
        trusted = parse_approval_keys(str(variables.get("APPROVAL_KEYS") or ""))
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read the approval keys of {name}: {exc}") from None
    verifier = ApprovalVerifier(trusted, KmsPublicKeys(lambda: target.client("kms")))
    key = verifier.verify(case.signed_approval(), accept_retired=False, now=_now(target))
    return f"signed with {key}, trusted by {name}"


def check_authorized(case: Case, tenants: Tenants, *, source: str) -> None:
    """ValidateCase's own rule (saga.tools.validate.authorize) against `tenants`."""
    try:
        authorize(case, tenants.approvers)
    except AuthorizationDenied as exc:
        raise InvalidCaseFile(f"{source}: {exc} (tenants from {tenants.source})") from None


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


def with_digest(case: Any, *, source: str) -> dict[str, Any]:
    """The case with its approval digest filled in; InvalidCaseFile names the bad field."""
    if not isinstance(case, dict):
        raise InvalidCaseFile(f"{source}: expected a JSON object, got {type(case).__name__}")
    try:
        return with_approval_digest(case)
    except InvalidRequest as exc:
        raise InvalidCaseFile(f"{source}: {exc}") from None


def approve(case: Any, tenants: Tenants, *, source: str) -> dict[str, Any]:
    """The case with its approval digest filled in; InvalidCaseFile names the bad field, or the
    tenant or approver ValidateCase would refuse."""
    approved = with_digest(case, source=source)
    check_authorized(parse_case(approved), tenants, source=source)
    return approved


def _write(case: dict[str, Any], output: str, *, force: bool) -> str:
    if output == "-":
        emit_json(case)
        return "stdout"
    path = Path(output)
    if path.exists() and not force:
        raise UsageError(f"{path} exists: pass --force to overwrite it")
    write_json_file(path, case)
    return str(path)


def _approval_summary(case: dict[str, Any], written_to: str) -> dict[str, Any]:
    approval = case["approval"]
    summary = {
        "file": written_to,
        "case_id": case["case_id"],
        "tenant_id": case["tenant_id"],
        "revision": approval["revision"],
        "approved_by": approval["approved_by"],
        "digest": approval["digest"],
        "signed": bool(approval.get("signature")),
    }
    for name in ("signed_at", "key_id", "start_by"):
        if approval.get(name):
            summary[name] = approval[name]
    return summary


def command_new(args: argparse.Namespace) -> int:
    case = approve(case_from_args(args), configured_tenants(args), source="case")
    written_to = _write(case, args.output, force=args.force)
    summary = _approval_summary(case, written_to)
    if args.output == "-":
        return 0
    if args.json:
        emit_json(summary)
    else:
        print(
            f"wrote case {case['case_id']} to {written_to} (digest {summary['digest']}); "
            f"an approver signs it with: sagactl case approve {written_to}"
        )
    return 0


def command_approve(args: argparse.Namespace) -> int:
    case = read_case_file(args.file)
    if isinstance(case, dict) and (args.approved_by or args.revision):
        approval = dict(case.get("approval") or {})
        if args.approved_by:
            approval["approved_by"] = args.approved_by
        if args.revision:
            approval["revision"] = args.revision
        case = {**case, "approval": approval}
    prepared = with_digest(case, source=str(args.file))
    start_by = _instant(args.start_by, "--start-by") if args.start_by else None
    target = resolve_target(args)
    approved = sign_case(target, prepared, now=_now(target), start_by=start_by)
    output = args.output or str(args.file)
    written_to = _write(approved, output, force=True)
    summary = _approval_summary(approved, written_to)
    if output == "-":
        return 0
    if args.json:
        emit_json(summary)
    else:
        print(
            f"approved case {approved['case_id']} revision {summary['revision']} as "
            f"{summary['approved_by']}, signed with {summary['key_id']}: {summary['digest']} "
            f"({written_to})"
        )
    return 0


def _now(target: Target) -> datetime:
    """Now as the target sees it: the local AWS's clock can be moved (`sagactl local advance`)."""
    return datetime.fromtimestamp(target.now(), UTC)


def _instant(value: str, flag: str) -> str:
    """An ISO 8601 time with a zone, normalized to UTC (`2026-12-01T18:00:00Z`)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{flag} {value!r}: expected an ISO 8601 time, e.g. 2026-12-01T18:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise UsageError(f"{flag} {value!r}: name the time zone, e.g. 2026-12-01T18:00Z")
    return format_instant(parsed)


def command_check(args: argparse.Namespace) -> int:
    raw = read_case_file(args.file)
    tenants = configured_tenants(args)
    # In ValidateCase's order: the fields, who approved, the digest, then the signature.
    try:
        case = parse_case(raw)
        check_authorized(case, tenants, source=str(args.file))
        verify_approval(case)
        require_signature(case)
        signature = (
            verify_signature(case, args)
            if args.deployed
            else "signed (the signature is verified with the deployed keys: --deployed)"
        )
    except (InvalidRequest, ApprovalMismatch, ApprovalInvalid, AuthorizationDenied) as exc:
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
            f"{args.file}: case {case.case_id} is valid, {case.approval.approved_by} may approve "
            f"for tenant {case.tenant_id} ({tenants.source}), the approval digest matches and "
            f"it is {signature}"
        )
    return 0


def _add_tenant_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deployed",
        action="store_true",
        help="check the tenant and approver against the deployed ValidateCase function's "
        "TENANTS (of --stack, or the local AWS) instead of cdk.json",
    )
    add_target_arguments(parser)


def register(subparsers: Subparsers) -> None:
    case = subparsers.add_parser(
        "case",
        help="write, approve and check case files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = case.add_subparsers(dest="case_command", metavar="SUBCOMMAND", required=True)

    new = commands.add_parser(
        "new",
        help="write an approved case file from flags",
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
    new.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    add_json_argument(new)
    _add_tenant_source(new)
    new.set_defaults(handler=guarded(command_new))

    approve_parser = commands.add_parser(
        "approve",
        help="approve a case file: fill in its digest and sign it with the approver's key",
        description="Validate the case's fields, fill in approval.digest (sha256 of the "
        "approved parameters and revision) and sign the approval with the approver's KMS key "
        "(the stack's ApprovalKeys output), with your credentials: on AWS only the approver's "
        "role or principal may sign, and CloudTrail records who did; against the local AWS "
        "(the environment `sagactl local up` prints) anyone may. Writes signed_at, key_id and "
        "signature into the file, or into --output. A case ValidateCase rejected is corrected, "
        "then approved again with the next --revision: it starts under its own execution name.",
    )
    approve_parser.add_argument("file", type=Path, help="the case file")
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
    approve_parser.set_defaults(handler=guarded(command_approve))

    check = commands.add_parser(
        "check",
        help="validate a case file and verify its approval digest",
        description="Check a case file as ValidateCase will: its fields, that the tenant is "
        "configured and the approver may approve for it, and that approval.digest matches the "
        "parameters. Exit 0 when it would be accepted, 2 (with the reason) when not.",
    )
    check.add_argument("file", type=Path, help="the case file")
    add_json_argument(check)
    _add_tenant_source(check)
    check.set_defaults(handler=guarded(command_check))
