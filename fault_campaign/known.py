"""Bugs the campaign found that are not fixed yet (a fix too large for the campaign's branch).

A violation that matches one of these is still a violation; the report counts it under its bug
so that a new one stands out. Remove an entry with the fix (its regression test in
tests/campaign/test_campaign_findings.py then passes instead of xfailing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    key: str
    summary: str
    invariant: str
    detail: re.Pattern[str]


# Fixed so far: reserve-sandbox-control-untyped (tests/campaign/test_campaign_findings.py).
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(violation: dict[str, str]) -> str | None:
    for bug in KNOWN_BUGS:
        if violation.get("invariant") == bug.invariant and bug.detail.search(
            violation.get("detail", "")
        ):
            return bug.key
    return None
