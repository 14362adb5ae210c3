"""sagactl: the operator CLI.

Each command group lives in its own module under `sagactl.commands` and exposes
`register(subparsers)`, which adds its parser and sets `handler=<callable(args) -> int>`.
Add a group by appending its module to COMMAND_MODULES.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

COMMAND_MODULES: tuple[str, ...] = (
    "sagactl.commands.local",
    "sagactl.commands.case",
    "sagactl.commands.start",
    "sagactl.commands.status",
    "sagactl.commands.ledger",
    "sagactl.commands.redrive",
    "sagactl.commands.sweep",
    "sagactl.commands.escalations",
    "sagactl.commands.inventory",
    "sagactl.commands.limits",
    "sagactl.commands.mcp",
)


class SuggestingParser(argparse.ArgumentParser):
    """argparse, plus "did you mean" for a mistyped command or choice (`sagactl strat` ->
    'start'); argparse's own `suggest_on_error` exists only from Python 3.14. Subparsers are of
    the parser's class, so every level suggests."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            choices = [str(choice) for choice in action.choices or ()]
            close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
            if not close:
                raise
            raise argparse.ArgumentError(
                action, f"{exc.message}; did you mean {close[0]!r}?"
            ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(
        prog="sagactl", description="Operate the replacement-order saga (on AWS or locally)."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # a reader that went away shows here, not at the interpreter's exit
    except BrokenPipeError:
        # `sagactl status CASE | head` ends quietly, like any Unix tool, instead of a traceback.
        # Not by SIGPIPE's default action: that also killed `sagactl local up` (and `sagactl mcp`
        # over HTTP) whenever a client hung up before its answer was written (Python's signal
        # module docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush finds nobody gone
        os.close(devnull)
        return 1
    return code


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    return int(handler(args))


if __name__ == "__main__":
    sys.exit(main())
