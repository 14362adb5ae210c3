"""sagactl: the operator CLI (placeholder entry point until the CLI lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("sagactl: no commands yet", file=sys.stderr)
    return 2
