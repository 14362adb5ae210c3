"""`sagactl case approve FILE` and `--case CASE_ID`: show what is signed, sign it with the
approver's key, write it into the file or store it on the draft (docs/design.md §9, §10).

Four eyes (saga.four_eyes): a refund above its tenant's threshold needs two distinct approvers.
Each approver runs the same command: their signature is added to those already over the same
digest (their own earlier one replaced: one per approver), and the command says how many are
still needed. A file whose parameters or revision changed keeps none of its earlier signatures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from saga.agent.drafts import draft_case
from saga.approvals import format_instant, parse_instant
from saga.errors import ApprovalInvalid, InvalidRequest
from saga.four_eyes import (
    approval_with,
    approvals_required,
    progress_text,
    signatures_of,
    threshold_text,
    with_signature,
)
from saga.models import parse_case, with_approval_digest
from sagactl.commands.common import read_case_file, resolve_target, write_json_file
from sagactl.commands.render import emit_json
from sagactl.errors import EXIT_REFUSED, InvalidCaseFile, UsageError
from sagactl.operations.drafts import (
    approve_draft,
    case_to_sign,
    default_approver,
    draft_signing,
    open_draft,
    refuse_signed,
)
from sagactl.operations.signing import sign_approval, stack_thresholds
from sagactl.paths import display_path
from sagactl.target import Target
from sagactl.views.approval import Signing, describe_case, describe_draft, still_needed
from sagactl.views.untrusted import visible_lines

# The two rules without a terminal, in the words `--help`, the README and the refusal use.
NO_TERMINAL_RULE = (
    "without a terminal (a script), `sagactl case approve FILE` signs without asking, the file "
    "being the approver's own input; `sagactl case approve --case CASE_ID` asks, so it needs "
    "--yes"
)


def with_digest(case: Any, *, source: str) -> dict[str, Any]:
    """The case with its approval digest filled in; InvalidCaseFile names the bad field."""
    if not isinstance(case, dict):
        raise InvalidCaseFile(f"{source}: expected a JSON object, got {type(case).__name__}")
    try:
        return with_approval_digest(case)
    except InvalidRequest as exc:
        raise InvalidCaseFile(f"{source}: {exc}") from None


def write_case(case: dict[str, Any], output: str, *, force: bool) -> str:
    if output == "-":
        emit_json(case)
        return "stdout"
    path = Path(output)
    if path.exists() and not force:
        raise UsageError(f"{display_path(path)} exists: pass --force to overwrite it")
    write_json_file(path, case)
    return display_path(path)


def approval_summary(case: dict[str, Any], written_to: str) -> dict[str, Any]:
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
    if approval.get("co_signatures"):
        summary["co_signed_by"] = [co["approved_by"] for co in approval["co_signatures"]]
    return summary


def command_approve(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.case is None):
        raise UsageError("approve either a case FILE or a proposed draft with --case CASE_ID")
    if args.case is not None:
        return command_approve_draft(args)
    case = read_case_file(args.file)
    on_file = dict(case.get("approval") or {}) if isinstance(case, dict) else {}
    if isinstance(case, dict) and (args.approved_by or args.revision):
        approval = dict(on_file)
        if args.approved_by and not on_file.get("signature"):
            approval["approved_by"] = args.approved_by  # nobody signed yet: the approver
        if args.revision:
            approval["revision"] = args.revision
        case = {**case, "approval": approval}
    prepared = with_digest(case, source=str(args.file))
    approver = args.approved_by or str(prepared["approval"]["approved_by"])
    start_by = _instant(args.start_by, "--start-by") if args.start_by else None
    output = args.output or str(args.file)
    target = resolve_target(args)
    # Four eyes: the other approvers' signatures stand if they are over this very digest and
    # revision (the caller's own earlier one is replaced); any change drops them all.
    kept = _signatures_still_standing(on_file, prepared["approval"])
    signing = _file_signing(target, prepared, [s for s in kept if s["approved_by"] != approver])
    # What is signed, before it is: on stderr when stdout carries JSON (--json, -o -).
    shown_on = sys.stderr if args.json or output == "-" else sys.stdout
    shown = describe_case(prepared, start_by=start_by, approver=approver, signing=signing)
    print(visible_lines(shown), file=shown_on, flush=True)
    # A person at a terminal is asked; a script (stdin not a terminal) signs what it was given.
    if not args.yes and sys.stdin.isatty() and not _confirmed("approve and sign this case?"):
        print("not approved: nothing signed or written", file=shown_on)
        return EXIT_REFUSED
    mine = sign_approval(
        target, prepared, approver=approver, now=target.now_utc(), start_by=start_by
    )
    approval = prepared["approval"]
    signatures = with_signature(kept, mine)
    approved = {
        **prepared,
        "approval": approval_with(int(approval["revision"]), approval["digest"], signatures),
    }
    written_to = write_case(approved, output, force=True)
    summary = approval_summary(approved, written_to)
    given = signing.after(approver)
    if signing.shown():
        summary["approvals"] = {"given": given, "required": signing.required}
    if output == "-":
        return 0
    if args.json:
        emit_json(summary)
    else:
        print(
            f"approved case {approved['case_id']} revision {summary['revision']} as "
            f"{approver}, signed with {mine['key_id']}: {summary['digest']} "
            f"({written_to}){_progress(signing, given, written_to)}"
            f"{_deadline(parse_case(approved).signed_approvals().start_by())}"
        )
    return 0


def _signatures_still_standing(
    on_file: dict[str, Any], approval: dict[str, Any]
) -> list[dict[str, Any]]:
    """The signatures the file carries over exactly this digest and revision."""
    same = on_file.get("digest") == approval["digest"] and on_file.get("revision") == approval.get(
        "revision"
    )
    return signatures_of(on_file) if same else []


def _file_signing(target: Target, case: dict[str, Any], others: list[dict[str, Any]]) -> Signing:
    """Four eyes for a case file: the stack's thresholds, and who else signed it already."""
    thresholds = stack_thresholds(target)
    tenant, refund = str(case["tenant_id"]), case["refund"]
    return Signing(
        approvals_required(thresholds, tenant, refund["currency"], refund["amount_minor"]),
        threshold_text(thresholds, tenant, refund["currency"]),
        [(str(s["approved_by"]), str(s.get("signed_at"))) for s in others],
    )


def _progress(signing: Signing, given: int, where: str) -> str:
    """What four eyes makes of the approval now, and what to do next."""
    if not signing.shown():
        return ""
    text = f"\n{still_needed(given, signing.required)}"
    if given < signing.required:
        text += f": sagactl case approve {where} --as APPROVER"
    return text


def command_approve_draft(args: argparse.Namespace) -> int:
    """`case approve --case CASE_ID`: show the draft an agent proposed, confirm, sign, store
    (the approval, or with four eyes a second approver's co-signature)."""
    if args.revision or args.output:
        raise UsageError("--revision and --output apply to files: a draft is approved as proposed")
    start_by = _instant(args.start_by, "--start-by") if args.start_by else None
    target = resolve_target(args)
    draft = open_draft(target, args.case)
    approver = args.approved_by or default_approver(target, str(draft["tenant_id"]))
    case = case_to_sign(draft, approver)  # refused before anything is shown or asked
    signing = draft_signing(target, draft)
    refuse_signed(draft, signing, None)
    refuse_signed(draft, signing, approver)
    shown = visible_lines(describe_draft(draft, approver, signing))
    if not args.json:
        print(shown)
    elif not args.yes:  # stdout is for the JSON; whoever confirms still sees what they sign
        print(shown, file=sys.stderr)
    if not args.yes and not _confirmed("approve and sign this case?"):
        print("not approved: nothing signed or stored")
        return EXIT_REFUSED
    approval = approve_draft(target, draft, case, start_by=start_by)
    given = signing.after(approver)
    if args.json:
        counted = {"approvals": {"given": given, "required": signing.required}}
        emit_json({"case_id": args.case, "approved": True, **approval, **counted})
        return 0
    mine = next(s for s in signatures_of(approval) if s["approved_by"] == approver)
    approved = parse_case(draft_case({**draft, "approval": approval}))
    if given >= signing.required:
        then = "; the agent can start it now (start_replacement)"
        then += f" ({progress_text(given, signing.required)})" if signing.shown() else ""
    else:
        then = (
            f"\n{still_needed(given, signing.required)}: sagactl case approve --case {args.case} "
            "--as APPROVER"
        )
    print(
        f"approved case {args.case} revision {approval['revision']} as {approver}, signed "
        f"with {mine['key_id']}: {approval['digest']}{then}"
        f"{_deadline(approved.signed_approvals().start_by())}"
    )
    return 0


def _deadline(start_by: str | None) -> str:
    """What a signed start deadline means, said where the approval is made (§9)."""
    if not start_by:
        return ""
    return (
        f"\nsigned start deadline: {start_by} (it must start by then; compensations and "
        "redrives later are not refused for it)"
    )


def _confirmed(question: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError(f"not approved, nothing signed: {NO_TERMINAL_RULE}")
    # Asked on stderr: stdout may be carrying JSON (--json).
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return input().strip().lower() in {"y", "yes"}


def _instant(value: str, flag: str) -> str:
    """An ISO 8601 time with a zone, normalized to UTC (`2026-12-01T18:00:00Z`), read as the
    tools read the approval's times."""
    try:
        return format_instant(parse_instant(value, flag))
    except ApprovalInvalid:
        raise UsageError(
            f"{flag} {value!r}: expected an ISO 8601 time with its time zone, e.g. "
            "2026-12-01T18:00Z"
        ) from None
