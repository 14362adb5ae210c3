"""`sagactl escalations [show CASE | resolve CASE --decision TEXT]`: the escalation worklist.

The escalation queue only notifies (one case puts several messages on it, the sweeper re-sends
a stuck action on every sweep, and reading a message counts toward its dead-letter redrive).
The worklist is the cases table: a case is open while it has no resolution and either its
outcome is ESCALATED, or its execution stopped (FAILED, TIMED_OUT, ABORTED) with the case still
IN_PROGRESS or COMPENSATION_PENDING.

  sagactl escalations               open cases, oldest first, each with the decision it needs
                                    (for a stopped execution: what failed, and whether
                                    `sagactl redrive` can help). A Scan of the cases table with
                                    a filter, read page by page: fine for an operator command
                                    at this scale, not for a hot path. Then, when the queue
                                    holds messages that no open case answers (a case rejected
                                    at ValidateCase has no case record, but the failed-execution
                                    rule reports each of its stops), how many and why, counted
                                    from the executions (the queue is never received from).
  sagactl escalations show CASE     everything needed to decide: the escalation, confirmed
                                    effects and compensations, the open ledger actions, the
                                    execution, and the messages the case has put on the queue
                                    (derived from their sources: `show` never receives from the
                                    queue).
  sagactl escalations resolve CASE --decision TEXT [--by WHO]
                                    records who decided what and when in the case record's
                                    `resolution` (its outcome stays), settles the case's open
                                    ledger actions in the same transaction (the sweeper stops
                                    reporting them; no redrive or late delivery dispatches them
                                    again), then deletes the case's messages from the queue.
                                    --by defaults to the caller: the STS caller ARN on AWS, the
                                    operating-system user locally. Reading the queue receives
                                    every message once: the others are made visible again at
                                    once, but each counts one more receive toward the
                                    dead-letter queue (5).

Exit codes: 0 done; 1 error (no such case, AWS unreachable, the queue cleanup failed after the
resolution was recorded); 2 bad input; 3 refused (the case is not open, already resolved, or
one of its actions is held by a running attempt right now). Refusals and bad input change
nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

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
from sagactl.identifiers import check_tenant
from sagactl.operations.escalations import (
    caller_identity,
    open_escalations,
    queue_note,
    resolve,
    show,
)
from sagactl.views.escalations import (
    Escalation,
    EscalationView,
    QueueNote,
    ResolveReport,
    limit_text,
)
from sagactl.views.untrusted import visible_lines

RESOLVE_HINT = 'resolve one with: sagactl escalations resolve CASE --decision "..."'


def command_list(args: argparse.Namespace) -> int:
    if args.tenant is not None:
        check_tenant(args.tenant)
    target = resolve_target(args)
    found = open_escalations(target, budget=resolve_budget(target, args.budget), tenant=args.tenant)
    queue = queue_note(target, found, tenant=args.tenant)
    if args.json:
        emit_json(
            {
                "tenant_id": args.tenant,
                "escalations": [e.to_json() for e in found],
                "queue": queue.to_json() if queue else None,
            }
        )
        return 0
    scope = f" for tenant {args.tenant}" if args.tenant else ""
    if not found:
        print(f"no open escalations{scope}")
    else:
        print(f"{len(found)} open escalation(s){scope}, oldest first:")
        for escalation in found:
            print(visible_lines(_escalation_lines(escalation)))
        print(RESOLVE_HINT)
    if queue is not None and queue.unowned:
        print(visible_lines(queue_lines(queue, scope)))
    return 0


def queue_lines(queue: QueueNote, scope: str = "") -> list[str]:
    """The queue's messages that no open case answers, and why (the failed-execution rule's)."""
    days = queue.retention_seconds / 86400
    lines = [
        f"escalation queue: {queue.depth} message(s) waiting (all cases); in the last "
        f"{days:g} day(s) (its retention) the failed-execution rule queued "
        f"{queue.unowned_messages} for executions{scope} that belong to no open case, one "
        "per stop:"
    ]
    for stops in queue.unowned:
        lines.append(
            f"  {stops.execution_name}: {stops.messages} message(s), {stops.status}: {stops.why}"
        )
    lines.append(
        "  nothing here is left to decide; those messages stay until whoever reads the queue "
        "deletes them, or its retention ends (`sagactl escalations` never receives from it)"
    )
    return lines


def _escalation_lines(escalation: Escalation, indent: str = "  ") -> list[str]:
    execution = f", execution {escalation.execution_status}" if escalation.execution_status else ""
    step = f" (step {escalation.step})" if escalation.step else ""
    lines = [
        f"{indent}{escalation.case_id} (tenant {escalation.tenant_id}): {escalation.outcome} "
        f"since {escalation.since}{execution}",
        f"{indent}  reason    {escalation.reason}{step}",
    ]
    if escalation.detail:
        lines.append(f"{indent}  detail    {escalation.detail}")
    if escalation.limit is not None:
        lines.append(f"{indent}  limit     {limit_text(escalation.limit)}")
    lines.append(f"{indent}  decision  {escalation.decision_needed}")
    if escalation.resolving:
        lines.append(f"{indent}  resolving {escalation.resolving}")
    return lines


def command_show(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    view = show(target, args.case_id, budget=resolve_budget(target, args.budget))
    if args.json:
        emit_json(view.to_json())
    else:
        print(visible_lines(show_lines(view, now=target.now())))
    return 0


def show_lines(view: EscalationView, *, now: float) -> list[str]:
    lines = [f"case {view.case_id} (tenant {view.tenant_id}): outcome {view.outcome}"]
    if view.open is not None:
        lines += ["", "open escalation:", *_escalation_lines(view.open)[1:]]
        if view.escalation and view.escalation.get("compensation_blocked"):
            lines.append(f"    blocked   {view.escalation['compensation_blocked']}")
    else:
        lines.append(f"  not open: {view.closed_reason}")
    if view.resolution:
        lines += _resolution_lines(view.resolution)
    lines += ["", "execution:", *_execution_lines(view.execution)]
    lines += ["", "confirmed effects (the ledger; once its records expired, the execution):"]
    lines += [_summary_line(action) for action in view.confirmed_effects] or ["  none"]
    lines += ["", "compensations (ledger):"]
    lines += [_summary_line(action) for action in view.compensations] or ["  none"]
    lines += ["", f"open actions (ledger, budget {view.attempt_budget} attempts each):"]
    lines += _open_action_lines(view, now) or ["  none"]
    lines += ["", "notifications (what this case put on the escalation queue, from their sources):"]
    lines += _notification_lines(view)
    if view.open is not None:
        lines += [
            "",
            f'resolve it with: sagactl escalations resolve {view.case_id} --decision "..."',
        ]
    return lines


def _execution_lines(execution: dict[str, Any] | None) -> list[str]:
    if execution is None:
        return ["  none found"]
    stopped = f" (stopped {execution['stopDate']})" if execution.get("stopDate") else ""
    lines = [
        f"  {execution.get('executionArn')}",
        f"  status    {execution.get('status')}{stopped}",
    ]
    if execution.get("error"):
        lines.append(f"  error     {execution['error']}: {execution.get('cause')}")
    return lines


def _notification_lines(view: EscalationView) -> list[str]:
    lines = []
    if view.resolution:
        lines.append("  removed from the queue when the case was resolved")
    for note in view.notifications:
        subject = note.get("action_key") or note.get("reason")
        if note.get("count"):
            subject = f"{note['count']} stop(s), the execution is {note.get('status')} now"
        lines.append(f"  {note['kind']:<24} {subject}: {note['producer']}")
    if not view.notifications and not view.resolution:
        lines.append("  none")
    if view.queue_depth is not None:
        lines.append(
            f"  queue depth: {view.queue_depth} message(s) waiting, all cases "
            "(`show` never receives from the queue)"
        )
    return lines


def _summary_line(action: dict[str, Any]) -> str:
    ref = f" ref {action['downstream_ref']}" if action.get("downstream_ref") else ""
    source = action.get("source")
    seen = f" (from the {source})" if source and source != "ledger" else ""
    return f"  {action['step']:<8} {action['status']} {action['action_key']}{ref}{seen}"


def _open_action_lines(view: EscalationView, now: float) -> list[str]:
    lines = []
    records = {action.action_key: action.record for action in view.actions}
    for action in view.open_actions:
        lines.append(f"  {action['step']:<8} {action['action_key']}")
        record = records.get(action["action_key"])
        if record:
            lines += record_lines(record, now=now)  # with who settled it, when it is
    return lines


def _resolution_lines(resolution: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "resolution:",
        f"  by        {resolution.get('by')}",
        f"  at        {resolution.get('at')}",
        f"  decision  {resolution.get('decision')}",
    ]
    settled = resolution.get("settled_actions") or []
    lines.append(f"  settled   {', '.join(settled) if settled else 'no open action'}")
    return lines


def command_resolve(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    by = args.by if args.by is not None else caller_identity(target)
    report = resolve(
        target,
        args.case_id,
        decision=args.decision,
        by=by,
        budget=resolve_budget(target, args.budget),
    )
    if args.json:
        emit_json(report.to_json())
    else:
        print(visible_lines(resolve_lines(report)))
    return 0


def resolve_lines(report: ResolveReport) -> list[str]:
    lines = [f"resolved case {report.case_id}", *_resolution_lines(report.resolution)[2:]]
    if report.settled:
        lines.append(
            "            each keeps its status (one with no record gets a SETTLED one); the "
            "sweeper no longer reports it and no delivery dispatches it again"
        )
    queue = report.queue
    if queue is None:
        lines.append("  queue     no escalation queue in the stack outputs")
    else:
        lines.append(
            f"  queue     {queue.removed} message(s) of this case deleted; "
            f"{queue.released} other message(s) read once and visible again"
        )
    return lines


def register(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "escalations",
        summary("escalations"),
        handler=command_list,
        doc=__doc__,
    )
    parser.add_argument("--tenant", help="only this tenant's cases")
    add_budget_argument(parser)
    add_aws_command_arguments(parser)
    commands = parser.add_subparsers(dest="escalations_command", metavar="SUBCOMMAND")

    show_parser = add_command(
        commands,
        "show",
        "everything a person needs to decide one case",
        handler=command_show,
        doc=__doc__,
    )
    show_parser.add_argument("case_id", metavar="CASE", help="the case id")
    add_budget_argument(show_parser)
    add_aws_command_arguments(show_parser)

    resolve_parser = add_command(
        commands,
        "resolve",
        "record a person's decision, settle the case's open actions, clear its messages",
        handler=command_resolve,
        doc=__doc__,
    )
    resolve_parser.add_argument("case_id", metavar="CASE", help="the case id")
    resolve_parser.add_argument(
        "--decision", required=True, help="what was decided (and done by hand), in plain words"
    )
    resolve_parser.add_argument(
        "--by",
        help="who decided (default: the caller: the STS caller ARN on AWS, the OS user locally)",
    )
    add_budget_argument(resolve_parser)
    add_aws_command_arguments(resolve_parser)
