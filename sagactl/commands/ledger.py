"""`sagactl ledger ACTION_KEY | --case CASE`, `sagactl stuck` and `keep-open-actions`: the ledger.

A case's action keys are derived, never looked up (saga.identity):
`<tenant>#reserve#<case>.reserve`, `#refund#`, `#ship#`, and the compensation
`<tenant>#release#<case>.reserve`. The tenant comes from the case record (`--tenant` when there
is none). `stuck` lists the open actions on the ledger's sparse `open-actions` index whose lease
ended more than --grace seconds ago (IN_PROGRESS nobody holds, or UNKNOWN), with the sweeper's
own query. `keep-open-actions` is the one-off step after upgrading to the rule that an open
record never expires (only a COMPLETED or FAILED record keeps a retention): it removes the TTL
attribute (`expires_at`) from the records open today, read from the same index, each write
conditional on the record still being open; safe to run again.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from saga.identity import parse_action_key
from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_budget_argument,
    add_command,
    resolve_target,
)
from sagactl.commands.render import emit_json, record_lines
from sagactl.config import resolve_budget
from sagactl.errors import NotFound, UsageError
from sagactl.identifiers import check_case_id, check_tenant
from sagactl.operations.records import (
    case_actions,
    ledger_record,
    read_case_record,
    stuck_actions,
)
from sagactl.operations.retention import keep_open_records
from sagactl.target import Target
from sagactl.views.case import actions_json, record_summary
from sagactl.views.untrusted import visible, visible_lines


def command_ledger(args: argparse.Namespace) -> int:
    if bool(args.action_key) == bool(args.case):
        raise UsageError("give either an ACTION_KEY or --case CASE")
    if args.action_key:
        try:
            parse_action_key(args.action_key)
        except ValueError:
            raise UsageError(
                f"{args.action_key!r} is not an action key (tenant#operation#action_id)"
            ) from None
    else:
        check_case_id(args.case)  # before any call: `acme#refund#x` is a key, not a case
    if args.tenant is not None:
        check_tenant(args.tenant)
    target = resolve_target(args)
    budget = resolve_budget(target, args.budget)
    if args.action_key:
        return _show_action(args, target, budget)
    return _show_case(args, target, budget)


def _show_action(args: argparse.Namespace, target: Target, budget: int) -> int:
    record = ledger_record(target, args.action_key)
    if record is None:
        raise NotFound(f"no ledger record for {args.action_key}")
    summary = record_summary(record, budget)
    if args.json:
        emit_json(summary)
    else:
        print(
            visible_lines([args.action_key, *record_lines(summary, indent="  ", now=target.now())])
        )
    return 0


def _show_case(args: argparse.Namespace, target: Target, budget: int) -> int:
    tenant = args.tenant
    if not tenant:
        case_record = read_case_record(target, args.case)
        if case_record is None:
            raise NotFound(
                f"no case record for {args.case} (the case was never validated?); "
                "pass --tenant to derive its action keys anyway"
            )
        tenant = str(case_record["tenant_id"])
    actions = case_actions(target, tenant, args.case, budget)
    if args.json:
        emit_json({"case_id": args.case, "tenant_id": tenant, "actions": actions_json(actions)})
    else:
        lines = [f"case {args.case} (tenant {tenant}), budget {budget} attempts per action"]
        now = target.now()
        for view in actions:
            lines.append(f"  {view.step:<8} {view.action_key}")
            lines += record_lines(view.record, now=now) if view.record else ["    no record"]
        print(visible_lines(lines))
    return 0


def command_stuck(args: argparse.Namespace) -> int:
    stuck = stuck_actions(resolve_target(args), args.grace)
    if args.json:
        emit_json({"grace_seconds": args.grace, "stuck": [asdict(action) for action in stuck]})
        return 0
    if not stuck:
        print(f"no stuck actions (open for more than {args.grace}s past their lease)")
        return 0
    print(f"{len(stuck)} stuck action(s):")
    for action in stuck:
        print(
            visible(
                f"  {action.status:<11} {action.action_key}  attempts {action.attempts}, "
                f"stuck {action.stuck_seconds:.0f}s, case {action.case_id}"
            )
        )
    return 0


def command_keep_open_actions(args: argparse.Namespace) -> int:
    report = keep_open_records(resolve_target(args), dry_run=args.dry_run)
    if args.json:
        emit_json({"dry_run": args.dry_run, **report.to_json()})
        return 0
    verb = "would keep" if args.dry_run else "kept"
    print(
        f"{report.open_records} open action(s); {verb} {len(report.kept)} that still carried a "
        "retention (TTL no longer deletes them before they are settled)"
    )
    for key in report.kept:
        print(visible(f"  {key}"))
    for key in report.changed_meanwhile:
        print(visible(f"  {key}: closed or settled meanwhile, left as it is"))
    return 0


def register(subparsers: Subparsers) -> None:
    ledger = add_command(
        subparsers,
        "ledger",
        summary("ledger"),
        handler=command_ledger,
        doc=__doc__,
    )
    ledger.add_argument("action_key", nargs="?", metavar="ACTION_KEY")
    ledger.add_argument("--case", metavar="CASE", help="every action of this case")
    ledger.add_argument("--tenant", help="the case's tenant, when it has no case record")
    add_budget_argument(ledger)
    add_aws_command_arguments(ledger)

    stuck = add_command(
        subparsers,
        "stuck",
        summary("stuck"),
        handler=command_stuck,
        doc=__doc__,
    )
    stuck.add_argument(
        "--grace",
        type=int,
        default=0,
        help="only actions whose lease ended more than this many seconds ago (0)",
    )
    add_aws_command_arguments(stuck)

    keep = add_command(
        subparsers,
        "keep-open-actions",
        summary("keep-open-actions"),
        handler=command_keep_open_actions,
        doc=__doc__,
    )
    keep.add_argument("--dry-run", action="store_true", help="only list what it would change")
    add_aws_command_arguments(keep)
