"""How a README ```console block's sample output is compared with what a command printed.

The convention (the README's author writes to it; tests/cli/test_readme_commands.py holds every
```console local block to it):

- The lines after a `$ command` line, up to the next `$ ` line or the end of the block, are
  what the command prints: stdout and stderr together, in the order printed. No lines means it
  prints nothing.
- A line that is only `...` stands for any number of lines, none included.
- `...` inside a line stands for any text within that line.
- Values that differ from run to run are compared by their shape, not their value (VARYING):
  times (`19:17:09.777`, `2026-11-29T19:17:07.102000+00:00`, `2026-11-29T19:17:26Z`),
  durations (`1.16s`), UUIDs (message and request ids, local key ids), the sandbox's refund and
  shipment ids (`re_<32 hex>`, `shp_<32 hex>`), the local Stripe server's ids (`re_`, `pi_`,
  `ch_` and 24 letters and digits) and epoch seconds (`"startDate": 1795979829.7`).
  Each is replaced by a placeholder on both sides before the comparison, so the README can
  show realistic values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

ELLIPSIS = "..."
VARYING: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)"), "<timestamp>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\.\d{3}\b"), "<clock>"),
    (re.compile(r"\b\d+\.\d+s\b"), "<duration>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b(re|shp)_[0-9a-f]{32}\b"), r"\1_<id>"),
    (re.compile(r"\b(re|pi|ch)_[A-Za-z0-9]{24}\b"), r"\1_<stripe id>"),
    (re.compile(r'("startDate": )\d+(\.\d+)?'), r"\1<epoch>"),
)


def normalized(line: str) -> str:
    line = line.rstrip()
    for pattern, placeholder in VARYING:
        line = pattern.sub(placeholder, line)
    return line


def _line_pattern(expected: str) -> re.Pattern[str]:
    parts = normalized(expected).split(ELLIPSIS)
    return re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)


@dataclass(frozen=True)
class Mismatch:
    expected_index: int  # the first expected line no way of matching got past
    expected: str | None  # that line (None: the output went on after the last expected line)
    actual_index: int  # where in the output the best attempt stood


def compare(expected: list[str], actual: list[str]) -> Mismatch | None:
    """None when `actual` is what `expected` shows (the convention above), else where the best
    attempt at matching stopped."""
    patterns = [None if line.strip() == ELLIPSIS else _line_pattern(line) for line in expected]
    lines = [normalized(line) for line in actual]
    furthest: list[tuple[int, int]] = [(0, 0)]

    @cache
    def matches(i: int, j: int) -> bool:
        furthest[0] = max(furthest[0], (i, j))
        if i == len(patterns):
            return j == len(lines)
        pattern = patterns[i]
        if pattern is None:  # any number of lines
            return any(matches(i + 1, k) for k in range(j, len(lines) + 1))
        return j < len(lines) and pattern.fullmatch(lines[j]) is not None and matches(i + 1, j + 1)

    if matches(0, 0):
        return None
    i, j = furthest[0]
    return Mismatch(i, expected[i] if i < len(expected) else None, j)


def explain(mismatch: Mismatch, expected: list[str], actual: list[str]) -> str:
    shown = "\n".join(f"    {line}" for line in actual)
    if mismatch.expected is None:
        return (
            f"the output goes on after the README's last line (at output line "
            f"{mismatch.actual_index + 1}):\n{shown}"
        )
    return (
        f"README line {mismatch.expected_index + 1} of its output, {mismatch.expected!r}, does "
        f"not match output line {mismatch.actual_index + 1} "
        f"({actual[mismatch.actual_index] if mismatch.actual_index < len(actual) else 'none'!r})"
        f"; the command printed:\n{shown}"
    )
