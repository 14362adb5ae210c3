"""sagactl: the operator CLI.

Each command group lives in its own module under `sagactl.commands` and exposes
`register(subparsers)`, which adds its parser and sets `handler=<callable(args) -> int>`.
Add a group by appending its module to COMMAND_MODULES.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

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
    "sagactl.commands.mcp",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sagactl", description="Operate the replacement-order saga (on AWS or locally)."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):
        # `sagactl status CASE | head` ends quietly, like any Unix tool, instead of a traceback.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    return int(handler(args))


if __name__ == "__main__":
    sys.exit(main())
