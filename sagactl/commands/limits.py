"""`sagactl limits [--tenant T] [--day YYYY-MM-DD]`: the daily refund ceilings and what is left.

Each tenant's ceiling per currency (the stack's RefundCeilings output, cdk.json
`refund_ceilings`), what that UTC day's counter says is used, and what is left. The day
defaults to today in UTC on the target's clock (the local AWS's, which `sagactl local advance`
moves). A refund the provider refused gives its amount back to the day it was charged; nothing
else does: not an escalation, not a person's resolution. A tenant the stack does not have is an
error (exit 1), a malformed day a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime

from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_command,
    resolve_target,
)
from sagactl.commands.render import emit_json
from sagactl.errors import UsageError
from sagactl.operations.limits import daily_limits
from sagactl.views.limits import HEADER

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_day(text: str) -> str:
    """A UTC day as the counters name it, `YYYY-MM-DD`, that exists in the calendar."""
    try:
        if not _DAY.fullmatch(text):
            raise ValueError
        datetime.strptime(text, "%Y-%m-%d")  # a day of the calendar, or ValueError
    except ValueError:
        raise UsageError(
            f"--day must be a UTC day as YYYY-MM-DD (e.g. 2026-03-01), got {text!r}"
        ) from None
    return text


def command_limits(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    day = parse_day(args.day) if args.day else target.now_utc().strftime("%Y-%m-%d")
    rows = daily_limits(target, day=day, tenant=args.tenant)
    if args.json:
        emit_json({"day": day, "limits": [row.to_json() for row in rows]})
        return 0
    if not rows:
        whom = f"tenant {args.tenant} has" if args.tenant else "no tenant of this stack has"
        print(
            f"{whom} a daily refund ceiling: its refunds are not limited per day "
            "(cdk.json `refund_ceilings` sets one)"
        )
        return 0
    print(f"daily refund ceilings on {day} (UTC)")
    print(HEADER)
    for row in rows:
        print(row.text())
    return 0


def register(subparsers: Subparsers) -> None:
    limits = add_command(
        subparsers,
        "limits",
        "the daily refund ceilings: each ceiling, used, left",
        handler=command_limits,
        doc=__doc__,
    )
    limits.add_argument("--tenant", metavar="T", help="only this tenant's ceilings")
    limits.add_argument(
        "--day", metavar="YYYY-MM-DD", help="the UTC day to show (default: today in UTC)"
    )
    add_aws_command_arguments(limits)
