"""`sagactl start FILE`: start the saga for a case, exactly once per case id.

The execution name is the case id (design.md §2), so the name is the idempotency key: an
existing execution of the case is reported instead of a second one being created. The input is
the case file's JSON in canonical form, so starting the same file twice sends the same input
(StartExecution returns the running execution for the same name and input).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from saga.errors import ApprovalMismatch, InvalidRequest
from saga.models import parse_case, verify_approval
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    positive_float,
    read_case_file,
)
from sagactl.errors import InvalidCaseFile, NotFound, guarded
from sagactl.render import emit_json, emit_json_line
from sagactl.target import Target, resolve_target
from sagactl.timeline import describe_execution, execution_summary, read_case_record


def canonical_input(case: Any) -> str:
    return json.dumps(case, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check_case(raw: Any, source: str) -> str:
    """Validate and verify the approval here, so a bad file never becomes an execution."""
    try:
        case = parse_case(raw)
        verify_approval(case)
    except (InvalidRequest, ApprovalMismatch) as exc:
        raise InvalidCaseFile(f"{source}: {exc}") from None
    return case.case_id


def start_case(target: Target, raw: Any, case_id: str) -> dict[str, Any]:
    """Start (or find) the case's execution: {"created", "execution_arn", "status", ...}.

    A case that already has a case record is never started again under a new name: its
    execution would only end DUPLICATE (design.md §8). That is reported, nothing is started.
    """
    payload = canonical_input(raw)
    existing = _existing(target, case_id)
    if existing is None:
        recorded = _recorded_elsewhere(target, raw, case_id)
        if recorded is not None:
            return recorded
        sfn = target.client("stepfunctions")
        try:
            response = sfn.start_execution(
                stateMachineArn=target.state_machine_arn, name=case_id, input=payload
            )
            arn = str(response["executionArn"])
            description = sfn.describe_execution(executionArn=arn)
            return _report(target, description, created=True, payload=payload)
        except ClientError as exc:
            # Another start won the race between our describe and our start.
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
        existing = describe_execution(target, case_id)
    return _report(target, existing, created=False, payload=payload)


def _recorded_elsewhere(target: Target, raw: Any, case_id: str) -> dict[str, Any] | None:
    """The report for a case whose record names another execution (or None: start it)."""
    record = read_case_record(target, case_id)
    if record is None:
        return None
    digest = raw.get("approval", {}).get("digest") if isinstance(raw, dict) else None
    if record.get("digest") != digest:
        raise InvalidCaseFile(
            f"case {case_id} already ran with other approved parameters (digest "
            f"{record.get('digest')}); one case id is one approved request: use a new case id"
        )
    original = record.get("execution_arn")
    return {
        "case_id": case_id,
        "created": False,
        "duplicate": True,
        "execution_arn": original,
        "status": None,
        "outcome": record.get("outcome"),
        "start_date": None,
        "same_input": True,
        "console_url": target.console_url(original) if isinstance(original, str) else None,
    }


def _existing(target: Target, case_id: str) -> dict[str, Any] | None:
    try:
        return describe_execution(target, case_id)
    except NotFound:
        return None


def _report(
    target: Target, description: dict[str, Any], *, created: bool, payload: str
) -> dict[str, Any]:
    summary = execution_summary(description)
    try:
        same_input = json.loads(description.get("input") or "null") == json.loads(payload)
    except ValueError:
        same_input = False
    return {
        "case_id": summary.get("name"),
        "created": created,
        "execution_arn": summary["executionArn"],
        "status": summary["status"],
        "start_date": summary.get("startDate"),
        "same_input": same_input,
        "console_url": target.console_url(summary["executionArn"]),
    }


def command_start(args: argparse.Namespace) -> int:
    raw = read_case_file(args.file)
    if args.skip_checks:
        case_id = raw.get("case_id") if isinstance(raw, dict) else None
        if not isinstance(case_id, str) or not case_id:
            raise InvalidCaseFile(f"{args.file}: case_id is missing (it names the execution)")
    else:
        case_id = check_case(raw, str(args.file))
    target = resolve_target(args)
    report = start_case(target, raw, case_id)
    if args.json:
        # with --watch, JSON Lines: the report, then watch's entries and the case
        (emit_json_line if args.watch else emit_json)(report)
    else:
        if report.get("duplicate"):
            print(
                f"case {case_id} already ran as {report['execution_arn']} (outcome "
                f"{report['outcome']}): DUPLICATE, nothing started"
            )
            return 0
        if report["created"]:
            print(f"started case {case_id}: {report['execution_arn']}")
        else:
            print(
                f"case {case_id} was already started: {report['execution_arn']} "
                f"is {report['status']} (since {report['start_date']}); no new execution"
            )
            if not report["same_input"]:
                print("  note: that execution ran a different input than this file")
        if report["console_url"]:
            print(f"console: {report['console_url']}")
        elif not args.watch:
            print(f"follow it with: sagactl watch {case_id}" + (" --local" if args.local else ""))
    if args.watch:
        from sagactl.commands.status import follow

        return follow(target, case_id, args, timeout=args.timeout)
    return 0


def register(subparsers: Subparsers) -> None:
    start = subparsers.add_parser(
        "start",
        help="start the saga for a case file (once per case id)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    start.add_argument("file", type=Path, help="the approved case file")
    start.add_argument(
        "--skip-checks",
        action="store_true",
        help="send the file unchecked (to see the workflow's own rejection)",
    )
    start.add_argument("--watch", action="store_true", help="then follow it like `sagactl watch`")
    start.add_argument(
        "--timeout", type=positive_float, default=600.0, help="--watch bound in seconds (600)"
    )
    add_aws_command_arguments(start)
    start.set_defaults(handler=guarded(command_start))
