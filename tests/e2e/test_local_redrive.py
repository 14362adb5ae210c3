"""RedriveExecution in the local AWS, driven by the real AWS CLI (`aws stepfunctions ...`).

The fixture stack (tests/e2e/local_stack_fixture.py): `Record` writes one item per call and
assigns the variables `recorded` and `case_id`; `Reject` raises Flaky while the case's
`fail_times` lasts (Retry: MaxAttempts 3, so 4 calls per run), counting its calls in the table.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from local_aws.environment import LocalAws
from tests.cli.test_awscli import aws as aws_json
from tests.cli.test_awscli import aws_run as aws
from tests.cli.test_awscli import start_execution
from tests.local_clock import local_clock

__all__ = ["local_clock"]

MAX_POLLS = 400


def start(local: LocalAws, name: str, fail_times: int, **extra: Any) -> str:
    case_input = json.dumps({"case_id": name, "fail_times": fail_times, **extra})
    return start_execution(local, name, case_input)


def describe(local: LocalAws, arn: str) -> dict[str, Any]:
    described: dict[str, Any] = aws_json(
        local, "stepfunctions", "describe-execution", "--execution-arn", arn
    )
    return described


def wait(local: LocalAws, arn: str) -> dict[str, Any]:
    return local.wait_for_execution(arn)  # boto3 polls: the CLI is what is under test


def history(local: LocalAws, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = aws_json(
        local, "stepfunctions", "get-execution-history", "--execution-arn", arn
    )["events"]
    return events


def list_executions(local: LocalAws, redrive_filter: str) -> list[dict[str, Any]]:
    executions: list[dict[str, Any]] = aws_json(
        local,
        "stepfunctions",
        "list-executions",
        "--state-machine-arn",
        local.outputs["StateMachineArn"],
        "--redrive-filter",
        redrive_filter,
    )["executions"]
    return executions


def redrive(local: LocalAws, arn: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return aws(local, "stepfunctions", "redrive-execution", "--execution-arn", arn, *extra)


def calls(local: LocalAws, name: str) -> tuple[int, int]:
    """(Record calls, Reject calls) of one case, from the fixture's table."""
    items = local.client("dynamodb").scan(TableName=local.outputs["LedgerTableName"])["Items"]
    counter = f"{name}#reject-calls"
    records = [i for i in items if i["action_key"]["S"].startswith(f"{name}#")]
    rejects = [int(i["calls"]["N"]) for i in records if i["action_key"]["S"] == counter]
    return len(records) - len(rejects), sum(rejects)


def entered(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
    ]


def test_redrive_resumes_the_failed_state_with_its_variables_and_fresh_retries(
    fixture_local_aws: LocalAws,
) -> None:
    local = fixture_local_aws
    # 5 failures: the first run's 4 calls all fail; a rerun with fresh counters succeeds.
    arn = start(local, "rd-1", fail_times=5)
    failed = wait(local, arn)
    assert failed["status"] == "FAILED" and failed["error"] == "Flaky"
    before = describe(local, arn)
    assert (before["redriveCount"], before["redriveStatus"]) == (0, "REDRIVABLE")
    assert "redriveDate" not in before and "redriveStatusReason" not in before
    assert calls(local, "rd-1") == (1, 4)
    first_history = history(local, arn)

    redriven = redrive(local, arn)

    assert redriven.returncode == 0, redriven.stderr
    assert json.loads(redriven.stdout)["redriveDate"]
    assert wait(local, arn)["status"] == "SUCCEEDED"
    after = describe(local, arn)
    assert after["redriveCount"] == 1
    assert after["redriveDate"] == json.loads(redriven.stdout)["redriveDate"]
    assert (after["redriveStatus"], after["redriveStatusReason"]) == (
        "NOT_REDRIVABLE",
        "Execution is SUCCEEDED and cannot be redriven",
    )
    assert "error" not in after and "stopDate" in after
    output = json.loads(after["output"])
    # $case_id and $recorded were assigned by Record in the first run, before the failure.
    assert output["outcome"] == "COMPLETED" and output["case_id"] == "rd-1"
    assert output["recorded"]["function_name"].endswith("RecordFunction")
    assert output["result"] == {"accepted": True, "calls": 6}
    assert calls(local, "rd-1") == (1, 6)  # Record not rerun; Reject 4 + 2 calls

    events = history(local, arn)
    assert events[: len(first_history)] == first_history  # the history continues
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    redriven_events = [e for e in events if e["type"] == "ExecutionRedriven"]
    assert [e["executionRedrivenEventDetails"] for e in redriven_events] == [{"redriveCount": 1}]
    rerun = events[len(first_history) :]
    assert rerun[0]["type"] == "ExecutionRedriven"
    assert entered(rerun) == ["Reject", "Done"]
    assert [e["type"] for e in rerun].count("TaskFailed") == 1  # one retry, then success

    listed = list_executions(local, "REDRIVEN")
    assert [(e["name"], e["redriveCount"]) for e in listed] == [("rd-1", 1)]
    not_redriven = list_executions(local, "NOT_REDRIVEN")
    assert not_redriven == []


def test_redrive_is_refused_as_step_functions_refuses_it(
    fixture_local_aws: LocalAws, local_clock: Callable[[float], None]
) -> None:
    local = fixture_local_aws
    running = start(local, "rd-running", fail_times=0, hold_seconds=4)  # a 4 s call
    refused = redrive(local, running)
    assert refused.returncode != 0
    assert (
        "An error occurred (ExecutionNotRedrivable) when calling the RedriveExecution operation: "
        "Execution is RUNNING and cannot be redriven"
    ) in refused.stderr
    assert wait(local, running)["status"] == "SUCCEEDED"

    succeeded = redrive(local, running)
    assert "(ExecutionNotRedrivable)" in succeeded.stderr
    assert "Execution is SUCCEEDED and cannot be redriven" in succeeded.stderr

    missing = redrive(local, running.replace("rd-running", "rd-never"))
    assert "(ExecutionDoesNotExist)" in missing.stderr

    old = start(local, "rd-old", fail_times=9)
    assert wait(local, old)["status"] == "FAILED"
    local_clock(13.9 * 86400)
    assert describe(local, old)["redriveStatus"] == "REDRIVABLE"
    local_clock(14.1 * 86400)
    late = describe(local, old)
    assert (late["redriveStatus"], late["redriveStatusReason"]) == (
        "NOT_REDRIVABLE",
        "Execution redrivable period exceeded",
    )
    too_late = redrive(local, old)
    assert too_late.returncode != 0
    assert "(ExecutionNotRedrivable)" in too_late.stderr
    assert "Execution redrivable period exceeded" in too_late.stderr
    assert describe(local, old)["redriveCount"] == 0
    assert calls(local, "rd-old") == (1, 4)  # nothing ran again


def test_a_client_token_answers_the_same_redrive_again(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    arn = start(local, "rd-token", fail_times=12)  # every run fails
    wait(local, arn)

    first = redrive(local, arn, "--client-token", "token-1")
    assert first.returncode == 0, first.stderr
    assert wait(local, arn)["status"] == "FAILED"
    repeat = redrive(local, arn, "--client-token", "token-1")

    assert repeat.returncode == 0, repeat.stderr
    assert json.loads(repeat.stdout) == json.loads(first.stdout)  # the same redrive's answer
    assert describe(local, arn)["redriveCount"] == 1
    assert calls(local, "rd-token") == (1, 8)  # not run a third time

    second = redrive(local, arn, "--client-token", "token-2")
    assert second.returncode == 0, second.stderr
    assert wait(local, arn)["status"] == "FAILED"
    assert describe(local, arn)["redriveCount"] == 2
    assert calls(local, "rd-token") == (1, 12)


def test_an_aborted_execution_resumes_where_it_was_stopped(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    # Stopped while a Reject call is in flight; that call then fails: still ABORTED, as on AWS.
    arn = start(local, "rd-stop", fail_times=3, hold_seconds=1.5)
    for _ in range(MAX_POLLS):
        events = local.history(arn)
        if "Reject" in entered(events) and events[-1]["type"] == "TaskStarted":
            break
        time.sleep(0.01)
    # Through the SDK, not the AWS CLI: a CLI process can take longer to start on a busy
    # machine than the call is held, and the stop must land while the call is in flight.
    local.client("stepfunctions").stop_execution(executionArn=arn)
    assert wait(local, arn)["status"] == "ABORTED"  # at once, as on AWS: the call goes on alone
    assert "stopDate" in describe(local, arn) and "error" not in describe(local, arn)
    for _ in range(MAX_POLLS):  # the call in flight ends on its own; its answer is dropped
        if calls(local, "rd-stop") == (1, 1):
            break
        time.sleep(0.01)
    assert calls(local, "rd-stop") == (1, 1)
    stopped = local.history(arn)
    assert stopped[-1]["type"] == "ExecutionAborted"
    assert [e for e in stopped if e["type"] in ("TaskFailed", "TaskTimedOut")] == []

    redriven = redrive(local, arn)

    assert redriven.returncode == 0, redriven.stderr
    assert wait(local, arn)["status"] == "SUCCEEDED"
    output = json.loads(describe(local, arn)["output"])
    assert output["case_id"] == "rd-stop" and output["result"] == {"accepted": True, "calls": 4}
    assert calls(local, "rd-stop") == (1, 4)  # Record not rerun; Reject's counter started again
    assert entered(history(local, arn)) == ["Record", "Reject", "Reject", "Done"]


def test_list_executions_pages_newest_first(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    sfn = local.client("stepfunctions")
    for name in ("page-1", "page-2", "page-3"):
        wait(local, start(local, name, fail_times=0))
    machine = local.outputs["StateMachineArn"]

    first = sfn.list_executions(stateMachineArn=machine, maxResults=2)
    rest = sfn.list_executions(stateMachineArn=machine, maxResults=2, nextToken=first["nextToken"])

    names = [e["name"] for e in first["executions"] + rest["executions"]]
    assert names == ["page-3", "page-2", "page-1"]
    assert "nextToken" not in rest
    assert all(e["redriveCount"] == 0 and "redriveDate" not in e for e in first["executions"])
    failed = sfn.list_executions(stateMachineArn=machine, statusFilter="FAILED")
    assert failed["executions"] == []
