"""sagactl: the operator CLI.

Each command lives in a module under `sagactl.commands` that exposes `register(subparsers)`,
which adds its parser and sets `handler=<callable(args) -> int>`. Add a command to
sagactl.commands.COMMANDS. Only the module of the command asked for is imported: `sagactl status`
loads neither the local AWS nor the MCP SDK, and works without them.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from typing import Any

from sagactl.commands import COMMANDS
from sagactl.paths import OPERATOR_PACKAGES


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


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """sagactl's parser: the commands named (all when None) in full, every other one by its name
    and summary alone, so that its module is not imported."""
    parser = SuggestingParser(
        prog="sagactl", description="Operate the replacement-order saga (on AWS or locally)."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = {COMMANDS[name].module for name in (COMMANDS if commands is None else commands)}
    registered: set[str] = set()
    for name, command in COMMANDS.items():
        if command.module not in wanted:
            subparsers.add_parser(name, help=command.summary)
        elif command.module not in registered:  # its module adds it with its neighbours
            registered.add(command.module)
            importlib.import_module(command.module).register(subparsers)
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
    words = list(sys.argv[1:] if argv is None else argv)
    asked = words[0] if words and words[0] in COMMANDS else None
    try:
        parser = build_parser([asked] if asked else [])
        args = parser.parse_args(words)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return 2
        return int(handler(args))
    except ModuleNotFoundError as exc:
        if asked is None or (exc.name or "").partition(".")[0] in OPERATOR_PACKAGES:
            raise  # the operator's own module: a bug, not an install
        from sagactl.errors import EXIT_ERROR

        missing = (exc.name or str(exc)).partition(".")[0]
        print(f"sagactl: {missing_text(asked, missing)}", file=sys.stderr)
        return EXIT_ERROR


def missing_text(command: str, module: str) -> str:
    """What to do when `command` needs `module` and this install lacks it."""
    extra = COMMANDS[command].extra
    if extra is None:
        return (
            f"sagactl {command} needs the module {module!r}, which is not installed: reinstall "
            "sagactl with its dependencies (`pip install .` in a checkout of the repository)"
        )
    return (
        f"sagactl {command} needs the module {module!r}, which comes with the [{extra}] extra: "
        f"`pip install '.[{extra}]'` in a checkout of the repository (`make venv` installs "
        "everything)"
    )


if __name__ == "__main__":
    sys.exit(main())
