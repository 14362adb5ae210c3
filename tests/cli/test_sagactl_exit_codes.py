"""`sagactl start` and `sagactl watch` say in their exit status how the case ended."""

from __future__ import annotations

import json
from pathlib import Path

from local_aws.environment import LocalAws
from sagactl.cli import build_parser
from sagactl.errors import EXIT_STATUSES
from sagactl.paths import PROJECT_ROOT
from tests.cli.sagactl_helpers import Sagactl, example, executions, saga, sagactl

__all__ = ["saga", "sagactl"]

WATCH = ("--timeout", "60")


def test_an_escalated_case_exits_5(saga: LocalAws, sagactl: Sagactl) -> None:
    started = sagactl("start", str(example("shipment-rejected")), "--watch", *WATCH)

    assert started.code == 5, started.out + started.err
    assert "outcome: ESCALATED" in started.out
    assert sagactl("watch", "case-shipment-rejected", "--interval", "0.05").code == 5
    assert sagactl("status", "case-shipment-rejected").code == 0  # status only reads


def test_a_failed_execution_exits_6_and_a_watch_that_runs_out_4(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    # The release's retries take a while (scaled): the first poll finds it RUNNING.
    still_running = sagactl(
        "start", str(example("compensation-stuck")), "--watch", "--timeout", "0.01"
    )
    assert still_running.code == 4, still_running.out + still_running.err
    assert "is still RUNNING after 0.01s" in still_running.err

    watched = sagactl("watch", "case-compensation-stuck", "--interval", "0.05", *WATCH)

    assert watched.code == 6, watched.out + watched.err
    assert "outcome: COMPENSATION_PENDING" in watched.out


def test_another_input_under_the_same_name_is_not_started_and_exits_8(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    assert sagactl("start", str(example("happy-path")), "--watch", *WATCH).code == 0
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["sandbox"]["faults"]["refund"] = ["lose_response"]  # not approved: the digest holds
    other = tmp_path / "other.json"
    other.write_text(json.dumps(case), encoding="utf-8")
    stop = saga.client("stepfunctions").describe_execution(
        executionArn=executions(saga)[0]["executionArn"]
    )["stopDate"]

    result = sagactl("start", str(other))
    watched = sagactl("start", str(other), "--watch", *WATCH)

    assert result.code == 8, result.err
    assert result.out.splitlines() == [
        "case case-happy-path not started: execution case-happy-path already exists "
        f"(SUCCEEDED at {stop.isoformat()}) and ran a different input than this file"
    ]
    assert watched.code == 8 and "watching" not in watched.out
    assert len(executions(saga)) == 1


def test_a_started_case_says_what_is_true_of_its_execution(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    assert sagactl("start", str(example("compensation-stuck"))).code == 0
    running = sagactl("start", str(example("compensation-stuck")))
    sfn = saga.client("stepfunctions")
    arn = executions(saga)[0]["executionArn"]
    started_at = sfn.describe_execution(executionArn=arn)["startDate"]
    saga.wait_for_execution(arn)
    stopped_at = sfn.describe_execution(executionArn=arn)["stopDate"]
    closed = sagactl("start", str(example("compensation-stuck")))

    assert running.code == 0 and closed.code == 0
    assert (
        f"case case-compensation-stuck was already started: {arn} is RUNNING since "
        f"{started_at.isoformat()}; no new execution"
    ) in running.out.splitlines()
    assert (
        f"case case-compensation-stuck was already started: {arn} FAILED at "
        f"{stopped_at.isoformat()}; no new execution"
    ) in closed.out.splitlines()


def test_the_exit_statuses_are_in_the_help_and_the_readme() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(subparsers.choices, dict)  # the subcommands' parsers by name
    for command in ("start", "watch"):
        text = " ".join(subparsers.choices[command].format_help().split())
        for code, meaning in EXIT_STATUSES:
            assert f"{code} {' '.join(meaning.split())}" in text, (command, code)
    for code, meaning in EXIT_STATUSES:
        assert f"| {code} | {meaning} |" in readme, code
