"""The catch-all's old escape (`\\'` inside a JSONata string, which AWS refuses), as the tests of
the definition's validation plant it: the text fixed in the source, its old spelling, and where
AWS reports it (the reconcile step's catch-all, whose place in the Catch list moves when a catch
is added before it, so it is read from the source, never typed)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIXED_TEXT = '\\" downstream by the action\'s business reference.\\"'
OLD_ESCAPE = "' downstream by the action\\\\'s business reference.'"


def _catch_all_location() -> str:
    source = (ROOT / "statemachines" / "replacement_order.asl.json").read_text(encoding="utf-8")
    catches = json.loads(source)["States"]["ReconcileStep"]["Catch"]
    (index,) = [i for i, catch in enumerate(catches) if catch["ErrorEquals"] == ["States.ALL"]]
    return f"/States/ReconcileStep/Catch[{index}]/Assign/escalation"


CATCH_ALL = _catch_all_location()
OLD_ESCAPE_REFUSAL = (
    "Invalid State Machine Definition: 'INVALID_JSONATA_EXPRESSION: "
    f"Unsupported escape sequence: \\\"'\" at {CATCH_ALL}'"
)
