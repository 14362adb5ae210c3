"""`sagactl sweep`: the deployed sweeper function, invoked now, against the local AWS."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local_aws.environment import LocalAws
from sagactl.operations.functions import SWEEPER_HANDLER
from stacks.constructs.tools import TOOL_SPECS
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl
from tests.local_clock import local_clock
from tests.queues import drain

__all__ = ["local_clock", "saga", "sagactl"]

RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"


def stuck_messages(local: LocalAws) -> list[dict[str, Any]]:
    """The sweeper's messages on the escalation queue (all messages are consumed)."""
    bodies = drain(local.client("sqs"), local.outputs["EscalationQueueUrl"])
    return [body for body in bodies if body.get("kind") == "STUCK_ACTION"]


def test_the_handler_is_the_stacks_sweeper() -> None:
    [spec] = [spec for spec in TOOL_SPECS if spec.construct_id == "SweepStuckActionsFunction"]
    assert spec.handler == SWEEPER_HANDLER


def test_sweep_escalates_a_stuck_action_once_per_sweep(
    saga: LocalAws, sagactl: Sagactl, local_clock: Callable[[float], None]
) -> None:
    run_example(sagactl, saga, "compensation-stuck")  # leaves its release UNKNOWN
    assert sagactl("sweep", "--json").json()["report"]["stuck"] == 0  # within the grace period
    local_clock(10 * 60)  # past cdk.json monitoring.stuck_grace_seconds (300)

    first = sagactl("sweep", "--json")

    assert first.code == 0, first.err
    result = first.json()
    assert result["function"].endswith("ToolsSweepStuckActionsFunction")
    assert result["report"] == {
        "stuck": 1,
        "escalated": 1,
        "by_status": {"IN_PROGRESS": 0, "UNKNOWN": 1},
        "action_keys": [RELEASE_KEY],
        "escalated_keys": [RELEASE_KEY],
    }
    [message] = stuck_messages(saga)
    assert (message["action_key"], message["case_id"]) == (RELEASE_KEY, "case-compensation-stuck")

    second = sagactl("sweep")

    assert second.code == 0, second.err
    assert "1 stuck action(s) (1 UNKNOWN), 1 escalation message(s) sent" in second.out
    assert f"  {RELEASE_KEY}" in second.out
    assert "reported until it is settled: by the first sweep that finds it, then after 1, 2, 4" in (
        second.out
    )
    [again] = stuck_messages(saga)
    assert again["escalation_id"] == message["escalation_id"]


def test_sweep_with_nothing_stuck_says_so(saga: LocalAws, sagactl: Sagactl) -> None:
    result = sagactl("sweep")

    assert result.code == 0, result.err
    assert result.out.strip().endswith(": 0 stuck action(s), 0 escalation message(s) sent")
    assert stuck_messages(saga) == []


def test_sweep_without_this_stacks_sweeper_is_not_found(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = {**saga.outputs, "LedgerTableName": "another-stacks-ledger"}
    path = tmp_path / "other-outputs.json"
    path.write_text(json.dumps(outputs), encoding="utf-8")
    monkeypatch.setenv("SAGA_LOCAL_OUTPUTS", str(path))

    result = sagactl("sweep", "--json")

    assert result.code == 1
    error = result.json()["error"]
    assert error["type"] == "NotFound"
    assert "LEDGER_TABLE=another-stacks-ledger" in error["message"]
