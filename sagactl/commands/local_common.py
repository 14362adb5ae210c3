"""What the `sagactl local` commands share: their error, the guard that prints it (`sagactl
local: ...`, exit 1), the text of a TTL deletion, a flag type."""

from __future__ import annotations

import argparse
import sys

from sagactl.errors import Handler
from sagactl.local_process import LocalProcessError


class LocalCommandError(Exception):
    """A user-facing failure of a `local` command (printed without a traceback)."""


def guarded_local(command: Handler) -> Handler:
    def run(args: argparse.Namespace) -> int:
        from local_aws.jsonata_reference import ReferenceJsonataUnavailable
        from local_aws.synth import SynthError
        from local_aws.template import TemplateError

        try:
            return command(args)
        except (
            LocalCommandError,
            LocalProcessError,
            SynthError,
            TemplateError,
            ReferenceJsonataUnavailable,
        ) as exc:
            print(f"sagactl local: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place (synthesis)
            print("sagactl local: interrupted", file=sys.stderr)
            return 130

    return run


def deleted_text(deleted: dict[str, int]) -> str:
    return ", ".join(f"{count} item(s) from {table}" for table, count in sorted(deleted.items()))


# Private-looking on purpose: argparse names the type in its error ("invalid
# _non_negative_float value"), and that message is part of the CLI's output.
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be a whole number >= 1")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value
