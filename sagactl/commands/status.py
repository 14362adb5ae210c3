"""`sagactl status CASE` and `sagactl watch CASE`: one readable timeline of a case.

`status` prints it once. `watch` follows a running case: every new step of the execution as it
happens (entries whose meaning depends on the next event, such as a failure that may be retried
or caught, wait for that event), then the ledger, effects, compensations, escalation and outcome.
The execution is the one the case record names (the run that passed validation, whatever its
name: a re-approved revision runs as `<case id>--r<revision>`), else the one named CASE.
"""

from __future__ import annotations

import argparse
import sys
import time

from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_budget_argument,
    add_case_argument,
    add_command,
    positive_float,
    resolve_target,
)
from sagactl.commands.render import case_view_text, emit_json, emit_json_line, entry_line
from sagactl.errors import WatchTimeout, execution_exit_code, exit_statuses_help
from sagactl.operations.case_view import gather
from sagactl.operations.executions import (
    describe_execution,
    execution_history,
    find_case_execution,
)
from sagactl.target import Target
from sagactl.views.timeline import build_entries
from sagactl.views.untrusted import visible

DEFAULT_INTERVAL_SECONDS = 1.0
RUNNING_STATUSES = frozenset({"RUNNING", "PENDING_REDRIVE"})


def command_status(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    view = gather(target, args.case_id, budget=args.budget)
    if args.json:
        emit_json(view.to_json())
    else:
        print(case_view_text(view))
    return 0


def follow(
    target: Target,
    case_id: str,
    args: argparse.Namespace,
    *,
    timeout: float,
    execution_arn: str | None = None,
) -> int:
    """Print new timeline entries of the case's execution (or of `execution_arn`) until it is
    no longer running (or the timeout); the exit status says how it ended (EXIT_STATUSES)."""
    interval = float(getattr(args, "interval", DEFAULT_INTERVAL_SECONDS))
    as_json = bool(getattr(args, "json", False))
    deadline = time.monotonic() + timeout
    if execution_arn is None:
        found = find_case_execution(target, case_id)
        case_id, execution_arn = found.case_id, str(found.require()["executionArn"])
    printed: set[int] = set()
    if not as_json:
        name = execution_arn.rpartition(":")[2]
        named = "" if name == case_id else f" (execution {name})"
        print(visible(f"watching case {case_id}{named} (Ctrl-C stops watching, not the execution)"))
    while True:
        description = describe_execution(target, execution_arn)
        entries = build_entries(execution_history(target, execution_arn))
        for entry in entries:
            if entry.final and entry.event_id not in printed:
                printed.add(entry.event_id)
                if as_json:
                    emit_json_line({"entry": entry.__dict__})
                else:
                    print(entry_line(entry), flush=True)
        if description["status"] not in RUNNING_STATUSES:
            break
        if time.monotonic() >= deadline:
            raise WatchTimeout(
                f"case {case_id} is still {description['status']} after {timeout:g}s; "
                f"`sagactl watch {case_id}` continues following it"
            )
        time.sleep(interval)
    view = gather(
        target, case_id, budget=getattr(args, "budget", None), execution_arn=execution_arn
    )
    if as_json:
        emit_json_line({"case": view.to_json()})
    else:
        print()
        print(case_view_text(view, with_timeline=False))
    sys.stdout.flush()
    return execution_exit_code(description)


def command_watch(args: argparse.Namespace) -> int:
    return follow(resolve_target(args), args.case_id, args, timeout=args.timeout)


def _add_common(parser: argparse.ArgumentParser) -> None:
    add_case_argument(parser)
    add_budget_argument(parser)
    add_aws_command_arguments(parser)


def register(subparsers: Subparsers) -> None:
    status = add_command(
        subparsers,
        "status",
        summary("status"),
        handler=command_status,
        doc=__doc__,
    )
    _add_common(status)

    watch = add_command(
        subparsers,
        "watch",
        summary("watch"),
        handler=command_watch,
        doc=__doc__ + "\nWith --json: one JSON object per line, "
        '{"entry": ...} per step, then {"case": ...} (the `status --json` view).',
        epilog=exit_statuses_help(),
    )
    _add_common(watch)
    watch.add_argument(
        "--interval", type=positive_float, default=DEFAULT_INTERVAL_SECONDS, help="poll seconds (1)"
    )
    watch.add_argument(
        "--timeout", type=positive_float, default=600.0, help="give up after seconds (600)"
    )
