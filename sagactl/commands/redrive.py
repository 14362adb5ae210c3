"""`sagactl redrive CASE`: rerun a failed execution from its failed state (RedriveExecution).

First shows what will rerun: the failed state (from the execution history) and the action it
runs with its remaining lifetime budget. Refuses, with the reason, when the execution is not
FAILED / TIMED_OUT / ABORTED, closed more than 14 days ago, or the failed step's action has no
budget left (or failed permanently). Asks for confirmation unless --yes; without a terminal and
without --yes it refuses.

Local mode: the emulator (moto 5.2.5) has no RedriveExecution. `--emulate` reruns the failed
Task state: its Lambda function with the payload that state last sent (the same action keys;
redrive count + 1), with fresh Retry counters under the state's Retry policy (waits skipped), and
reports the result. This emulates the failed step only: the states after it are not run, and the
execution stays FAILED in the emulator.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_budget_argument,
)
from sagactl.errors import RedriveRefused, UsageError, guarded
from sagactl.redrive import RedrivePlan, emulate_redrive, plan_redrive, redrive
from sagactl.render import emit_json
from sagactl.target import resolve_target
from sagactl.timeline import resolve_budget

LOCAL_NO_REDRIVE = (
    "the local emulator (moto 5.2.5) has no RedriveExecution. Pass --emulate to rerun only the "
    "failed step's Lambda with its last input (same action keys, redrive count + 1, its Retry "
    "policy); the states after it are not run"
)


def plan_lines(plan: RedrivePlan) -> list[str]:
    lines = [f"case {plan.case_id}: execution {plan.status} (stopped {plan.stopped_at})"]
    step = plan.failed_step
    if step is None:
        lines.append("  failed state: not found in the history")
    else:
        lines.append(
            f"  will rerun:   {step.state}"
            + (f" ({step.error}: {step.cause})" if step.error else "")
        )
    for action in plan.actions:
        lines.append(
            f"  action:       {action['action_key']} {action['status'] or 'no record'}, "
            f"attempts {action['attempts']}/{action['budget']} "
            f"({action['remaining_budget']} left)"
        )
    lines.append(f"  redrive:      #{plan.redrive_count + 1}; states that succeeded are not rerun")
    return lines


def invocation_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for invocation in result["invocations"]:
        error = invocation["error"]
        text = "ok" if invocation["ok"] else f"{error['type']}: {error['message']}"
        lines.append(f"  retry {invocation['retry']}: {text}")
    lines.append("  the step " + ("succeeded" if result["succeeded"] else "failed again"))
    return lines


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
    if target.local and not args.emulate:
        raise RedriveRefused(f"{LOCAL_NO_REDRIVE}.")
    if args.emulate and not target.local:
        raise UsageError("--emulate is for the local emulator only; on AWS redrive is real")
    if not args.json:
        print("\n".join(plan_lines(plan)))
    verb = "emulate the redrive of" if args.emulate else "redrive"
    if not _confirmed(args, f"{verb} case {args.case_id}?"):
        print("not redriven", file=sys.stderr)
        return 1
    result: dict[str, Any] = (
        emulate_redrive(target, plan) if args.emulate else redrive(target, plan)
    )
    if args.json:
        emit_json({"plan": plan.to_json(), "result": result})
        return 0
    if not result["emulated"]:
        print(f"redriven: {result['execution_arn']} (redrive #{result['redrive']})")
        if result.get("console_url"):
            print(f"console: {result['console_url']}")
        print(f"follow it with: sagactl watch {args.case_id}")
        return 0
    print(f"EMULATED redrive #{result['redrive']} of {result['state']} ({result['function']}):")
    print("\n".join(invocation_lines(result)))
    for action in result["actions"]:
        after = action["after"] or {}
        print(
            f"  {action['action_key']}: {action['before']['status']} -> {after.get('status')}, "
            f"attempts {action['before']['attempts']} -> "
            f"{after.get('attempts')}/{after.get('budget')}"
        )
    print(f"  note: {result['not_run']}")
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "redrive",
        help="rerun a failed execution from its failed state (refuses when that cannot help)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("case_id", metavar="CASE", help="the case id (= execution name)")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="local only: re-invoke the failed step's Lambda (see above)",
    )
    add_budget_argument(parser)
    add_aws_command_arguments(parser)
    parser.set_defaults(handler=guarded(command_redrive))
