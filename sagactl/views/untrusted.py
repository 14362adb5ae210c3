"""Text that came from a case or from AWS, made safe to print on an operator's terminal.

A case's fields, an execution's cause, a refusal quoting what a caller sent (an approval's
`key_id`, which the signature does not cover; a field name the case model refuses), a person's
decision: any of it can carry bytes a terminal obeys. ESC starts CSI and OSC sequences (colours,
cursor moves, clearing the screen, the window title, OSC 52 writing the clipboard), U+009B is
CSI in one character, a carriage return rewrites the line, and the bidirectional overrides and
isolates reorder what is shown (an amount, a case id). Every text view passes its lines through
`visible` at the output boundary, so such a character is shown as its escape (`\\x1b`, `\\x9b`,
`\\u202e`, as `repr` writes it) and the terminal never receives it. A line is one line: a
newline inside it (untrusted, since the view joins its own lines) is shown escaped too.

JSON output (`--json`) needs none of this: `json.dumps` writes every control character and every
character beyond ASCII as a `\\u` escape (ensure_ascii, its default), for programs to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# C0 controls (tab and newline included), DEL, the C1 controls (U+0080-U+009F, U+009B CSI among
# them), the Arabic letter mark, the left-to-right and right-to-left marks, the line and
# paragraph separators, the bidirectional embeddings and overrides (U+202A-U+202E) and isolates
# (U+2066-U+2069).
_DRIVES_A_TERMINAL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: object) -> str:
    """`text` (any value, as str) with every character that could drive a terminal escaped."""
    return _DRIVES_A_TERMINAL.sub(_escape, str(text))


def visible_lines(lines: Iterable[str]) -> str:
    """A view's lines, each made visible, joined by the view's own newlines."""
    return "\n".join(visible(line) for line in lines)
