"""A case rejected at ValidateCase, corrected and re-approved, starts again under its own name.

Revision 1 runs under the case id; the rejected execution keeps that name for 90 days, so a
re-approved revision runs as `<case id>--r<revision>`, and `status`, `watch` and `redrive` find
it by the case id (the case record names the execution that passed ValidateCase).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from local_aws.environment import LocalAws
from saga.identity import execution_name
from saga.models import CASE_ID_PATTERN
from tests.cli.sagactl_helpers import Sagactl, example, executions, saga, sagactl, scan
from tests.cli.test_awscli import aws_run
from tests.cli.test_sagactl_case import NEW_CASE

__all__ = ["saga", "sagactl"]

# What Step Functions takes as an execution name that CloudWatch Logs can carry (the stack logs).
LOGGABLE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
LONGEST_CASE_ID = "c" + "x" * 79


def test_revision_one_keeps_the_case_id_and_later_revisions_get_their_own_name() -> None:
    assert execution_name("case-7", 1) == "case-7"
    assert execution_name("case-7", 2) == "case-7--r2"
    assert execution_name("case-7", 12) == "case-7--r12"


@pytest.mark.parametrize("revision", [2, 9, 10, 123_456, 10**30, 10**100])
def test_derived_names_fit_step_functions_even_for_the_longest_case_id(revision: int) -> None:
    assert re.fullmatch(CASE_ID_PATTERN, LONGEST_CASE_ID) and len(LONGEST_CASE_ID) == 80
    for case_id in (LONGEST_CASE_ID, LONGEST_CASE_ID[:75], "case-7"):
        name = execution_name(case_id, revision)
        assert LOGGABLE_NAME.match(name), name
        assert name != case_id
        assert name.startswith(case_id[:30])  # still recognizable
    # Cut names stay apart: other case ids with the same start, other revisions.
    other = LONGEST_CASE_ID[:70] + "y" * 10
    assert execution_name(LONGEST_CASE_ID, revision) != execution_name(other, revision)
    assert execution_name(LONGEST_CASE_ID, revision) != execution_name(
        LONGEST_CASE_ID, revision + 1
    )


def test_the_local_aws_refuses_execution_names_step_functions_refuses(saga: LocalAws) -> None:
    machine = saga.outputs["StateMachineArn"]
    case_file = f"file://{example('happy-path')}"
    start = ("stepfunctions", "start-execution", "--state-machine-arn", machine)

    too_long = aws_run(saga, *start, "--name", "n" * 81, "--input", case_file)
    spaced = aws_run(saga, *start, "--name", "case 7", "--input", case_file)

    assert too_long.returncode != 0 and "length less than or equal to 80" in too_long.stderr
    assert spaced.returncode != 0 and "(InvalidName)" in spaced.stderr
    assert executions(saga) == []


def test_a_rejected_case_corrected_and_reapproved_starts_as_its_next_revision(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["refund"]["amount_minor"] = 1999  # edited after the approval: ValidateCase refuses it
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")

    rejected = sagactl("start", str(case_file), "--skip-checks", "--watch", "--timeout", "60")
    assert rejected.code == 6, rejected.out + rejected.err  # FAILED at ValidateCase
    assert "ApprovalMismatch" in rejected.out

    assert sagactl("case", "approve", str(case_file), "--revision", "2").code == 0
    started = sagactl("start", str(case_file))

    assert started.code == 0, started.err
    arn = saga.outputs["StateMachineArn"].replace(":stateMachine:", ":execution:")
    assert (
        "started case case-happy-path revision 2 as execution case-happy-path--r2 (each "
        f"re-approved revision runs under its own name): {arn}:case-happy-path--r2"
    ) in started.out.splitlines()
    assert "follow it with: sagactl watch case-happy-path--r2" in started.out
    watched = sagactl("watch", "case-happy-path", "--interval", "0.05", "--timeout", "60")
    assert watched.code == 0, watched.out + watched.err
    assert (
        "watching case case-happy-path (execution case-happy-path--r2) (Ctrl-C stops watching, "
        "not the execution)"
    ) in watched.out.splitlines()  # in-process handlers print JSON lines in between
    assert "outcome: COMPLETED" in watched.out

    view = sagactl("status", "case-happy-path", "--json").json()
    assert (view["execution"]["name"], view["status"], view["outcome"]) == (
        "case-happy-path--r2",
        "SUCCEEDED",
        "COMPLETED",
    )
    by_name = sagactl("status", "case-happy-path--r2", "--json").json()
    assert (by_name["case_id"], by_name["execution"]["name"]) == (
        "case-happy-path",
        "case-happy-path--r2",
    )
    # Revision 1's execution FAILED and could be redriven; the case's execution SUCCEEDED.
    redrive = sagactl("redrive", "case-happy-path", "--yes")
    assert redrive.code == 3 and "it SUCCEEDED" in redrive.err
    again = sagactl("start", str(case_file))
    assert (again.code, "no new execution" in again.out) == (0, True)
    assert sorted(e["name"] for e in executions(saga)) == [
        "case-happy-path",
        "case-happy-path--r2",
    ]
    assert len(scan(saga, "PaymentsTableName")) == 1


def test_the_longest_case_id_runs_as_a_revision(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case_file = tmp_path / "long.json"
    args = [*NEW_CASE, "--revision", "2", "-o", str(case_file)]
    args[args.index("case-cli-1")] = LONGEST_CASE_ID
    assert sagactl(*args).code == 0
    assert sagactl("case", "approve", str(case_file)).code == 0

    started = sagactl("start", str(case_file), "--watch", "--timeout", "60", "--json")

    assert started.code == 0, started.out + started.err
    report = started.json_lines("created")[0]
    name = execution_name(LONGEST_CASE_ID, 2)
    assert (report["execution_name"], len(name)) == (name, 80)
    view = sagactl("status", LONGEST_CASE_ID, "--json").json()
    assert (view["execution"]["name"], view["outcome"]) == (name, "COMPLETED")
