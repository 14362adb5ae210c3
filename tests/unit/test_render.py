from __future__ import annotations

from typing import Any

import pytest

from sagactl.commands.render import _clock, _compensation_lines, record_lines
from sagactl.views.case import ActionView, CaseView

RELEASE_KEY = "acme#release#case-1.reserve"
DECIDED = {"by": "ops@acme", "at": "2026-12-01T10:00:00Z", "decision": "released by hand"}


def test_clock_shows_milliseconds_whatever_the_timestamp_precision() -> None:
    assert _clock("2026-11-29T19:44:45+00:00") == "19:44:45.000"
    assert _clock("2026-11-29T19:44:45.123456+00:00") == "19:44:45.123"
    assert _clock("2026-11-29T19:44:45.5+00:00") == "19:44:45.500"


def test_clock_leaves_what_it_cannot_read() -> None:
    assert _clock("not a time") == "not a time"


def _record(status: str, attempts: int, **more: Any) -> dict[str, Any]:
    return {
        "action_key": RELEASE_KEY,
        "status": status,
        "attempts": attempts,
        "budget": 8,
        "remaining_budget": 8 - attempts,
        **more,
    }


@pytest.mark.parametrize(
    ("record", "attempts"),
    [
        (_record("SETTLED", 0, resolution=DECIDED), "0 (settled: no more attempts)"),
        (_record("UNKNOWN", 3, resolution=DECIDED), "3 (settled: no more attempts)"),
        (_record("UNKNOWN", 3), "3/8 (5 left)"),
    ],
)
def test_a_settled_record_shows_no_budget_left_to_spend(
    record: dict[str, Any], attempts: str
) -> None:
    assert f"    attempts        {attempts}" in record_lines(record, now=0.0)


def _view(record: dict[str, Any]) -> CaseView:
    return CaseView(
        case_id="case-1",
        tenant_id="acme",
        execution=None,
        console_url=None,
        timeline=[],
        actions=[ActionView("release", RELEASE_KEY, record)],
        effects={},
        compensations=[],
        escalation=None,
        escalation_queue_depth=None,
        case_record=None,
        attempt_budget=8,
        now=0.0,
    )


def test_a_settled_unknown_release_is_shown_settled_not_unfinished() -> None:
    settled = _compensation_lines(_view(_record("UNKNOWN", 8, resolution=DECIDED)))
    assert settled[-1] == (f"  UNKNOWN {RELEASE_KEY} (settled by ops@acme at 2026-12-01T10:00:00Z)")
    open_one = _compensation_lines(_view(_record("UNKNOWN", 8)))
    assert open_one[-1] == f"  UNKNOWN {RELEASE_KEY} (unfinished: attempts 8/8)"
