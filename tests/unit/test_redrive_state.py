"""The local redrive's refusals that a scenario cannot reach cheaply, on a stand-in execution:
Step Functions redrives an execution only while its history has fewer than 24,999 events
(RedriveExecution, API reference: room for ExecutionRedriven and one more event under the
25,000-event limit)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from local_aws.redrive_state import NOT_REDRIVABLE, REDRIVABLE, redrive_status

NOW = datetime.datetime(2026, 11, 30, 16, 0, tzinfo=datetime.UTC)


def _failed_execution(events: int) -> Any:
    history = SimpleNamespace(get_event_history=lambda: [{}] * events)
    return SimpleNamespace(
        status="FAILED",
        start_date=NOW - datetime.timedelta(hours=1),
        stop_date=NOW - datetime.timedelta(minutes=1),
        exec_worker=SimpleNamespace(env=SimpleNamespace(event_manager=history)),
    )


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (24_998, (REDRIVABLE, None)),
        (24_999, (NOT_REDRIVABLE, "Execution history event limit exceeded")),
        (25_000, (NOT_REDRIVABLE, "Execution history event limit exceeded")),
    ],
)
def test_a_history_with_24999_events_is_not_redrivable(
    events: int, expected: tuple[str, str | None]
) -> None:
    assert redrive_status(_failed_execution(events), NOW) == expected
