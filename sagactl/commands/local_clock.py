"""`sagactl local advance|clock`: move and read the clock of a running local AWS."""

from __future__ import annotations

import argparse
import json
import os
import sys

from sagactl.clock_client import (
    SCHEDULED_RULES_EFFECT,
    AdvanceUnfinished,
    ClockReading,
    ClockUnavailable,
    advance_clock,
    read_clock,
)
from sagactl.commands.common import add_command
from sagactl.commands.local_common import (
    LocalCommandError,
    _non_negative_float,
    deleted_text,
    guarded_local,
)
from sagactl.local_process import process_alive, read_pid_file


def _running_endpoint(args: argparse.Namespace) -> str:
    """The local AWS to talk to: --endpoint, else $AWS_ENDPOINT_URL (as every sagactl command),
    else the running `sagactl local up` of --state-dir."""
    if args.endpoint:
        return str(args.endpoint)
    from_env = os.environ.get("AWS_ENDPOINT_URL")
    if from_env:
        return from_env
    record = read_pid_file(args.state_dir)
    if record is None or not process_alive(int(record["pid"])) or not record.get("endpoint"):
        raise LocalCommandError(
            "no local AWS is running: start one with `sagactl local up` "
            "(or pass --endpoint / set AWS_ENDPOINT_URL)"
        )
    return str(record["endpoint"])


def _offset_text(seconds: float) -> str:
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}d {hours:02d}:{minutes:02d}:{secs:02d}"


def _print_reading(reading: ClockReading, as_json: bool) -> None:
    if as_json:
        print(json.dumps(reading.to_json(), indent=2, sort_keys=True))
        return
    ahead = _offset_text(reading.offset_seconds)
    print(f"local AWS clock: {reading.now_utc} (real time + {ahead})")
    deleted = reading.effects.get("ttl_deleted")
    if deleted:
        print(f"TTL deleted {deleted_text(deleted)}")
    fired = reading.effects.get(SCHEDULED_RULES_EFFECT)
    if fired:
        print(f"scheduled rule(s) fired once, before this returned: {', '.join(fired)}")


# Past this long, `advance` says what the local AWS is doing after the jump (on stderr), and
# again when that changes or every PROGRESS_EVERY_SECONDS.
PROGRESS_AFTER_SECONDS = 3.0
PROGRESS_EVERY_SECONDS = 10.0


class _Progress:
    """What the local AWS does after the jump, said once the wait is noticeable."""

    def __init__(self) -> None:
        self.said: tuple[str, float] | None = None

    def __call__(self, doing: str, elapsed: float) -> None:
        if elapsed < PROGRESS_AFTER_SECONDS:
            return
        if self.said and self.said[0] == doing and elapsed - self.said[1] < PROGRESS_EVERY_SECONDS:
            return
        self.said = (doing, elapsed)
        print(
            f"sagactl local: the clock moved; waiting for what runs after the jump: {doing} "
            f"({elapsed:.0f}s so far)",
            file=sys.stderr,
            flush=True,
        )


def command_advance(args: argparse.Namespace) -> int:
    seconds = args.days * 86400 + args.hours * 3600 + args.minutes * 60 + args.seconds
    if seconds <= 0:
        raise LocalCommandError("say how far: --days, --hours, --minutes and/or --seconds (> 0)")
    endpoint = _running_endpoint(args)
    try:
        reading = advance_clock(endpoint, seconds, progress=_Progress())
    except ValueError as exc:
        raise LocalCommandError(f"the clock did not move: {exc}") from None
    except ClockUnavailable as exc:
        raise LocalCommandError(f"cannot reach the local AWS's clock: {exc}") from None
    except AdvanceUnfinished as unfinished:
        _print_reading(unfinished.moved, args.json)
        raise LocalCommandError(
            f"the clock moved (to {unfinished.moved.now_utc}), but what runs after a jump (TTL "
            f"deletion, the scheduled rules it made due) did not report back: "
            f"{unfinished.reason}. `sagactl local clock` shows the clock; the handler log of "
            "`sagactl local up` what ran"
        ) from None
    _print_reading(reading, args.json)
    return 0


def command_clock(args: argparse.Namespace) -> int:
    try:
        reading = read_clock(_running_endpoint(args))
    except ClockUnavailable as exc:
        raise LocalCommandError(f"cannot reach the local AWS's clock: {exc}") from None
    _print_reading(reading, args.json)
    return 0


def _add_clock_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint",
        help="the local AWS (default: $AWS_ENDPOINT_URL, else the running `sagactl local up`)",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def register_clock(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    advance = add_command(
        local,
        "advance",
        "move the local AWS's clock forward (leases, key retention, TTL, token windows)",
        handler=command_advance,
        guard=guarded_local,
        description="Move the clock of a running local AWS forward: the Lambda code, Step "
        "Functions timestamps, DynamoDB TTL and the ClientRequestToken window all read it. Items "
        "whose TTL has passed are deleted, and each scheduled rule (the stuck-action sweeper) "
        "whose period the jump passed fires once, before the command returns: it waits as long "
        f"as that takes, and past {PROGRESS_AFTER_SECONDS:g} seconds says on stderr what it is "
        "waiting for. The clock never goes back.",
    )
    for unit in ("days", "hours", "minutes", "seconds"):
        advance.add_argument(f"--{unit}", type=_non_negative_float, default=0.0, metavar="N")
    _add_clock_target(advance)

    clock = add_command(
        local,
        "clock",
        "show the local AWS's clock and how far it is ahead",
        handler=command_clock,
        guard=guarded_local,
        description="Print the time of a running local AWS, and how far `sagactl local "
        "advance` has moved it ahead of real time.",
    )
    _add_clock_target(clock)
