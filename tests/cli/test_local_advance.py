"""`sagactl local advance` / `local clock`, and sagactl's own notion of now against the local AWS.

In-process against the test session's local AWS (AWS_ENDPOINT_URL points at it), and once as a
user runs it: `sagactl local up` in another process, moved from a second command.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import boto3
import pytest

from local_aws import clock as clock_module
from local_aws.emulator import LOCAL_ACCOUNT_ID, sweep_ttl_until
from local_aws.environment import LocalAws
from local_aws.invokes import HandlerRequest, add_request_hook, remove_request_hook
from local_aws.schedules import RuleScheduler
from sagactl import clock_client
from sagactl.cli import build_parser
from sagactl.commands import local_clock as local_clock_command
from sagactl.commands.local import DEFAULT_TTL_SWEEP_SECONDS
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl
from tests.cli.test_local_up import _free_port, _run_sagactl, _up_fixture_stack, _wait_for

__all__ = ["saga", "sagactl"]

RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"


def test_advance_moves_the_local_clock_and_clock_shows_it(saga: LocalAws, sagactl: Sagactl) -> None:
    advanced = sagactl("local", "advance", "--days", "1", "--hours", "2", "--minutes", "30")

    assert advanced.code == 0, advanced.err
    assert saga.clock.offset_seconds == 86400 + 2 * 3600 + 30 * 60
    assert "(real time + 1d 02:30:00)" in advanced.out
    shown = sagactl("local", "clock", "--json")
    assert shown.code == 0
    assert shown.json()["offset_seconds"] == 95400
    assert abs(shown.json()["now"] - saga.clock.now()) < 5


class SlowSweeper:
    """Holds every request the sweeper function sends to the local AWS: a sweep that takes
    longer than the clock client waits for an answer."""

    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds
        self.held = 0

    def before(self, request: HandlerRequest) -> None:
        invocation = request.invocation
        if invocation is not None and "SweepStuckActions" in invocation.function_name:
            self.held += 1
            time.sleep(self.hold_seconds)

    def after(self, request: HandlerRequest, status: int) -> str | None:
        return None


def test_advance_waits_for_a_slow_sweep_in_a_new_worker_and_says_what_it_waits_for(
    saga: LocalAws, sagactl: Sagactl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jump fires the sweeper's schedule; the sweep starts a new worker process (which maps
    the clock) and outlasts the client's timeout. The command waits for it, says what it waits
    for, and reports the jump as done, never as a failure."""
    monkeypatch.setattr(clock_client, "_HTTP_TIMEOUT_SECONDS", 1.0)  # silence longer fails
    monkeypatch.setattr(clock_module, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(local_clock_command, "PROGRESS_AFTER_SECONDS", 0.5)
    scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, saga.server.region, poll_seconds=3600)
    saga.server.start_schedules(scheduler)
    saga.server.retire_lambda_environments()  # the sweep's worker starts during the advance
    slow = SlowSweeper(hold_seconds=1.5)
    add_request_hook("slow-sweeper", slow)
    try:
        scheduler.tick()  # the scheduler has seen the rule: its first period starts now
        advanced = sagactl("local", "advance", "--minutes", "10")
    finally:
        remove_request_hook("slow-sweeper")
        saga.server.stop_schedules()

    assert advanced.code == 0, advanced.err
    assert slow.held >= 1  # the sweep ran, slowly, before the command returned
    assert saga.clock.offset_seconds == 600
    assert "(real time + 0d 00:10:00)" in advanced.out
    assert (
        "scheduled rule(s) fired once, before this returned: "
        "ReplacementOrderSaga-dev-MonitoringSweepSchedule"
    ) in advanced.out
    assert (
        "sagactl local: the clock moved; waiting for what runs after the jump: scheduled rule "
        "ReplacementOrderSaga-dev-MonitoringSweepSchedule fired: running its target "
        "ReplacementOrderSaga-dev-ToolsSweepStuckActionsFunction ("
    ) in advanced.err
    assert "cannot reach" not in advanced.err


def test_advance_refuses_no_distance_and_negative_ones(saga: LocalAws, sagactl: Sagactl) -> None:
    nothing = sagactl("local", "advance")
    assert nothing.code == 1 and "say how far" in nothing.err
    backwards = sagactl("local", "advance", "--hours", "-1")
    assert backwards.code == 2 and "must be >= 0" in backwards.err
    too_far = sagactl("local", "advance", "--days", "4000")
    assert too_far.code == 1 and "10 years" in too_far.err
    assert saga.clock.offset_seconds == 0


def test_stuck_and_lease_ages_follow_the_local_clock(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    assert sagactl("stuck", "--grace", "3600", "--json").json()["stuck"] == []

    sagactl("local", "advance", "--hours", "2")

    stuck = sagactl("stuck", "--grace", "3600", "--json").json()["stuck"]
    assert [action["action_key"] for action in stuck] == [RELEASE_KEY]
    assert stuck[0]["stuck_seconds"] > 3600
    record = sagactl("ledger", RELEASE_KEY)
    ended = re.search(r"lease ends\s+(\d+)s ago", record.out)
    assert ended is not None and int(ended.group(1)) > 7000, record.out


def test_the_redrive_window_follows_the_local_clock(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")

    sagactl("local", "advance", "--days", "15")
    refused = sagactl("redrive", "case-compensation-stuck", "--yes", "--json")

    assert refused.code == 3
    assert refused.json()["error"]["message"] == (
        "case case-compensation-stuck: Step Functions says NOT_REDRIVABLE: "
        "Execution redrivable period exceeded"
    )


def test_advance_and_ttl_against_a_running_local_up(tmp_path: Path) -> None:
    port = _free_port()
    up, state, _ = _up_fixture_stack(tmp_path, port)
    local = ("local", "--state-dir", str(state))
    try:
        _wait_for(state / "local.pid", up)
        endpoint = f"http://127.0.0.1:{port}"
        ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        now = json.loads(_run_sagactl(*local, "clock", "--json").stdout)["now"]
        ddb.put_item(
            TableName="fx-LedgerTable",
            Item={"action_key": {"S": "k"}, "expires_at": {"N": str(int(now) + 3600)}},
        )

        advanced = _run_sagactl(*local, "advance", "--hours", "1", "--minutes", "1")

        assert advanced.returncode == 0, advanced.stderr
        assert "(real time + 0d 01:01:00)" in advanced.stdout
        assert "TTL deleted 1 item(s) from fx-LedgerTable" in advanced.stdout
        assert ddb.scan(TableName="fx-LedgerTable")["Items"] == []
        shown = _run_sagactl(*local, "clock")
        assert "(real time + 0d 01:01:" in shown.stdout
        assert _run_sagactl(*local, "down").returncode == 0
        up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    gone = _run_sagactl(*local, "advance", "--hours", "1")
    assert gone.returncode == 1 and "no local AWS is running" in gone.stderr


def test_local_up_sweeps_ttl_in_the_background(fixture_local_aws: LocalAws) -> None:
    """Without an advance, `local up` deletes what has expired on its own, some time later (as
    DynamoDB does): here every 0.05 s, until stopped."""
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    table = local.outputs["LedgerTableName"]
    expired = {"action_key": {"S": "k"}, "expires_at": {"N": str(int(local.clock.now()) - 1)}}
    ddb.put_item(TableName=table, Item=expired)
    stop = threading.Event()
    sweeper = threading.Thread(target=sweep_ttl_until, args=(stop, 0.05))
    sweeper.start()
    try:
        for _ in range(200):
            if not ddb.scan(TableName=table)["Items"]:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        sweeper.join(timeout=10)
    assert ddb.scan(TableName=table)["Items"] == []
    assert not sweeper.is_alive()
    assert local.clock.offset_seconds == 0


def test_the_sweep_interval_is_an_option() -> None:
    default = build_parser().parse_args(["local", "up"])
    assert default.ttl_sweep_seconds == DEFAULT_TTL_SWEEP_SECONDS
    never = build_parser().parse_args(["local", "up", "--ttl-sweep-seconds", "0"])
    assert never.ttl_sweep_seconds == 0
