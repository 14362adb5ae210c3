"""`sagactl start FILE`: start the saga for an approved case file, once.

The execution is named after the case. Revision 1 runs under the case id itself. A case that
ValidateCase rejected (an approver not allowed, a stale approval, ...) did nothing, but its
execution keeps that name for 90 days; corrected and re-approved as the next revision
(`sagactl case approve FILE --revision 2`), it runs as `<case id>--r<revision>` (when that
would pass Step Functions' 80 characters, the case id is cut and a hash of the case id and the
revision keeps the name apart). `sagactl status|watch|redrive CASE` find that execution by the
case id: the case record names the execution that owns the case.

Starting the same file again starts nothing: the execution of its name is reported. A case that
already ran (its record names another execution, e.g. one started from the console under
another name) is not run again: DUPLICATE. The input is the file's JSON in canonical form, so
the same file always sends the same input. The file is validated here first (fields, approval
digest), so a bad file never becomes an execution. It is checked as ValidateCase checks it, in
its order (the fields, the tenant and its approver as the stack's ApprovalKeys output lists
them, the digest, that it is signed), so the first reason given is ValidateCase's; the
signature itself is verified by ValidateCase (`sagactl case check --deployed` asks beforehand).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_command,
    check_case_file,
    positive_float,
    read_case_file,
    resolve_target,
)
from sagactl.commands.render import emit_json, emit_json_line
from sagactl.errors import (
    EXIT_DUPLICATE,
    EXIT_NOT_STARTED,
    InvalidCaseFile,
    exit_statuses_help,
)
from sagactl.operations.executions import start_case
from sagactl.operations.signing import stack_tenants
from sagactl.views.untrusted import visible_lines


def start_exit_code(report: dict[str, Any]) -> int:
    """0 when this file's execution runs or ran; else why nothing was started."""
    if report.get("duplicate"):
        return EXIT_DUPLICATE
    return 0 if report["same_input"] else EXIT_NOT_STARTED


def _state(report: dict[str, Any]) -> str:
    """What is true of the execution now: running since it started, or closed when it stopped."""
    if report["status"] in ("RUNNING", "PENDING_REDRIVE"):
        return f"is {report['status']} since {report['start_date']}"
    return f"{report['status']} at {report['stop_date']}"


def report_lines(report: dict[str, Any]) -> list[str]:
    case_id, name, arn = report["case_id"], report["execution_name"], report["execution_arn"]
    if report.get("duplicate"):
        return [
            f"case {case_id} already ran as {arn} (outcome {report['outcome']}): DUPLICATE, "
            "nothing started"
        ]
    if not report["same_input"]:
        return [
            f"case {case_id} not started: execution {name} already exists ({_state(report)}) "
            "and ran a different input than this file"
        ]
    if not report["created"]:
        return [f"case {case_id} was already started: {arn} {_state(report)}; no new execution"]
    if name == case_id:
        return [f"started case {case_id}: {arn}"]
    return [
        f"started case {case_id} revision {report['revision']} as execution {name} (each "
        f"re-approved revision runs under its own name): {arn}"
    ]


def command_start(args: argparse.Namespace) -> int:
    raw = read_case_file(args.file)
    target = resolve_target(args)
    if args.skip_checks:
        case_id = raw.get("case_id") if isinstance(raw, dict) else None
        if not isinstance(case_id, str) or not case_id:
            raise InvalidCaseFile(f"{args.file}: case_id is missing (it names the execution)")
    else:
        case_id = check_case_file(raw, stack_tenants(target), str(args.file)).case_id
    report = start_case(target, raw, case_id)
    code = start_exit_code(report)
    if args.json:
        # with --watch, JSON Lines: the report, then watch's entries and the case
        (emit_json_line if args.watch else emit_json)(report)
    else:
        print(visible_lines(report_lines(report)))
        if report["console_url"]:
            print(f"console: {report['console_url']}")
        elif code == 0 and not args.watch:
            # By the execution's own name until ValidateCase has bound the case to it.
            watch = case_id if report["execution_name"] == case_id else report["execution_name"]
            print(f"follow it with: sagactl watch {watch}" + (" --local" if args.local else ""))
    if code != 0 or not args.watch:
        return code
    from sagactl.commands.status import follow

    return follow(
        target, case_id, args, timeout=args.timeout, execution_arn=report["execution_arn"]
    )


def register(subparsers: Subparsers) -> None:
    start = add_command(
        subparsers,
        "start",
        summary("start"),
        handler=command_start,
        doc=__doc__,
        epilog=exit_statuses_help(),
    )
    start.add_argument("file", type=Path, help="the approved case file")
    start.add_argument(
        "--skip-checks",
        action="store_true",
        help="send the file unchecked (to see the workflow's own rejection)",
    )
    start.add_argument(
        "--watch",
        action="store_true",
        help="then follow it like `sagactl watch` (exit status: how the case ended)",
    )
    start.add_argument(
        "--timeout", type=positive_float, default=600.0, help="--watch bound in seconds (600)"
    )
    add_aws_command_arguments(start)
