"""`sagactl sweep`: run the stuck-action sweeper now and show what it found.

Invokes the stack's SweepStuckActionsFunction, the function its EventBridge schedule runs every
few minutes (on AWS, and in `sagactl local up`). The sweeper reads the ledger's open actions
whose lease ended more than its grace period ago (IN_PROGRESS that nobody holds, or UNKNOWN) and
sends an escalation message for each stuck action that is due one: the first sweep that finds it,
then after 1, 2, 4, ... sweep intervals, at most a day apart, always with the same
`escalation_id`. `sagactl stuck` lists the same actions without sending anything.

The function is the one whose handler is the sweeper's and whose LEDGER_TABLE is this stack's
ledger, so the same command works against AWS and the local AWS.
"""

from __future__ import annotations

import argparse
from typing import Any

from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_command,
    resolve_target,
)
from sagactl.commands.render import emit_json
from sagactl.operations.functions import sweep
from sagactl.views.untrusted import visible_lines


def sweep_lines(result: dict[str, Any]) -> list[str]:
    report = result["report"]
    stuck = int(report.get("stuck", 0))
    by_status = report.get("by_status") or {}
    counts = ", ".join(f"{count} {status}" for status, count in by_status.items() if count)
    lines = [
        f"swept with {result['function']}: {stuck} stuck action(s)"
        + (f" ({counts})" if counts else "")
        + f", {report.get('escalated', 0)} escalation message(s) sent"
    ]
    lines.extend(f"  {key}" for key in report.get("action_keys", []))
    if stuck:
        lines.append(
            "  each one is reported until it is settled: by the first sweep that finds it, "
            "then after 1, 2, 4, ... sweep intervals, at most a day apart"
        )
    return lines


def command_sweep(args: argparse.Namespace) -> int:
    result = sweep(resolve_target(args))
    if args.json:
        emit_json(result)
    else:
        print(visible_lines(sweep_lines(result)))
    return 0


def register(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "sweep",
        summary("sweep"),
        handler=command_sweep,
        doc=__doc__,
    )
    add_aws_command_arguments(parser)
