"""`sagactl status CASE` and `sagactl watch CASE`: one readable timeline of a case.

`status` prints it once. `watch` follows a running case: every new step of the execution as it
happens (entries whose meaning depends on the next event, such as a failure that may be retried
or caught, wait for that event), then the ledger, effects, compensations, escalation and outcome.
"""

from __future__ import annotations

import argparse
import sys
import time

from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_budget_argument,
    positive_float,
)
from sagactl.errors import WatchTimeout, guarded
from sagactl.render import case_view_text, emit_json, emit_json_line, entry_line
from sagactl.target import Target, resolve_target
from sagactl.timeline import (
    build_entries,
    describe_execution,
    execution_history,
    gather,
)

DEFAULT_INTERVAL_SECONDS = 1.0


def command_status(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    view = gather(target, args.case_id, budget=args.budget)
    if args.json:
        emit_json(view.to_json())
    else:
        print(case_view_text(view))
    return 0


def follow(target: Target, case_id: str, args: argparse.Namespace, *, timeout: float) -> int:
    """Print new timeline entries until the execution is no longer RUNNING (or the timeout)."""
    interval = float(getattr(args, "interval", DEFAULT_INTERVAL_SECONDS))
    as_json = bool(getattr(args, "json", False))
    deadline = time.monotonic() + timeout
    printed: set[int] = set()
    if not as_json:
        print(f"watching case {case_id} (Ctrl-C stops watching, not the execution)")
    while True:
        description = describe_execution(target, case_id)
        entries = build_entries(execution_history(target, description["executionArn"]))
        for entry in entries:
            if entry.final and entry.event_id not in printed:
                printed.add(entry.event_id)
                if as_json:
                    emit_json_line({"entry": entry.__dict__})
                else:
                    print(entry_line(entry), flush=True)
        if description["status"] != "RUNNING":
            break
        if time.monotonic() >= deadline:
            raise WatchTimeout(
                f"case {case_id} is still RUNNING after {timeout:g}s; "
                f"`sagactl watch {case_id}` continues following it"
            )
        time.sleep(interval)
    view = gather(target, case_id, budget=getattr(args, "budget", None))
    if as_json:
        emit_json_line({"case": view.to_json()})
    else:
        print()
        print(case_view_text(view, with_timeline=False))
    sys.stdout.flush()
    return 0


def command_watch(args: argparse.Namespace) -> int:
    return follow(resolve_target(args), args.case_id, args, timeout=args.timeout)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case_id", metavar="CASE", help="the case id (= execution name)")
    add_budget_argument(parser)
    add_aws_command_arguments(parser)


def register(subparsers: Subparsers) -> None:
    status = subparsers.add_parser(
        "status",
        help="the timeline of a case: states, retries, ledger, effects, outcome",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(status)
    status.set_defaults(handler=guarded(command_status))

    watch = subparsers.add_parser(
        "watch",
        help="follow a running case until its execution ends",
        description=__doc__ + "\nWith --json: one JSON object per line, "
        '{"entry": ...} per step, then {"case": ...} (the `status --json` view).',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(watch)
    watch.add_argument(
        "--interval", type=positive_float, default=DEFAULT_INTERVAL_SECONDS, help="poll seconds (1)"
    )
    watch.add_argument(
        "--timeout", type=positive_float, default=600.0, help="give up after seconds (600)"
    )
    watch.set_defaults(handler=guarded(command_watch))
