"""`sagactl redrive CASE`: rerun a failed execution from its failed state (RedriveExecution).

First shows what will rerun: the failed state (from the execution history) and the action it
runs with its remaining lifetime budget. Refuses, with the reason, when the execution is not
FAILED / TIMED_OUT / ABORTED, Step Functions says it is not redrivable (closed more than 14 days
ago, ...), ValidateCase rejected the case (a rerun rejects it again: correct the case and
approve it as the next revision), a person resolved it, or the failed step's action has no
budget left (or failed permanently). Asks for
confirmation unless --yes; without a terminal and without --yes it refuses.

The execution then continues from the failed state, with the input and variables that state had;
the states that succeeded are not rerun. Follow it with `sagactl watch CASE`. The same call runs
on AWS and against the local AWS (`sagactl local up`).
"""

from __future__ import annotations

import argparse
import sys

from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_budget_argument,
    add_case_argument,
    add_command,
    resolve_target,
)
from sagactl.commands.render import emit_json, plan_lines
from sagactl.config import resolve_budget
from sagactl.errors import UsageError
from sagactl.operations.redrive import plan_redrive, redrive
from sagactl.views.untrusted import visible, visible_lines


def _confirmed(args: argparse.Namespace, question: str) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError("not a terminal, so no confirmation possible: pass --yes to redrive")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def command_redrive(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    budget = resolve_budget(target, args.budget)
    plan = plan_redrive(target, args.case_id, budget=budget)
    if not args.json:
        print("\n".join(plan_lines(plan)))  # each line written out (plan_lines)
    if not _confirmed(args, visible(f"redrive case {args.case_id}?")):
        print("not redriven", file=sys.stderr)
        return 1
    result = redrive(target, plan)
    if args.json:
        emit_json({"plan": plan.to_json(), "result": result})
        return 0
    local = " --local" if args.local else ""
    lines = [f"redriven: {result['execution_arn']} (redrive #{result['redrive']})"]
    if result.get("console_url"):
        lines.append(f"console: {result['console_url']}")
    lines.append(f"follow it with: sagactl watch {args.case_id}{local}")
    print(visible_lines(lines))
    return 0


def register(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "redrive",
        summary("redrive"),
        handler=command_redrive,
        doc=__doc__,
    )
    add_case_argument(parser)
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_budget_argument(parser)
    add_aws_command_arguments(parser)
