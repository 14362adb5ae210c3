"""`sagactl redrive`: refusals with reasons, and a real redrive (RedriveExecution) locally."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from local_aws.environment import LocalAws
from sagactl.errors import RedriveRefused
from sagactl.operations.redrive import plan_redrive
from sagactl.target import local_target
from sagactl.views.redrive import REDRIVE_WINDOW_SECONDS
from tests.cli.sagactl_helpers import Sagactl, example, run_example, saga, sagactl, scan
from tests.cli.test_awscli import start_execution
from tests.cli.test_sagactl_case import NEW_CASE
from tests.local_clock import local_clock

__all__ = ["local_clock", "saga", "sagactl"]

CASE = "case-compensation-stuck"
RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"
SKU = "SKU-RED-MUG"


def _stock(local: LocalAws, sku: str) -> int:
    items = scan(local, "InventoryTableName")
    return next(int(i["available"]["N"]) for i in items if i["sku"]["S"] == sku)


def test_redrive_of_a_succeeded_case_is_refused(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "happy-path")

    result = sagactl("redrive", "case-happy-path", "--yes", "--json")

    assert result.code == 3
    error = result.json()["error"]
    assert error["type"] == "RedriveRefused"
    assert "it SUCCEEDED; there is nothing to rerun" in error["message"]


def test_redrive_of_an_unknown_case(saga: LocalAws, sagactl: Sagactl) -> None:
    result = sagactl("redrive", "no-such-case", "--yes")

    assert result.code == 1 and "no execution for case no-such-case" in result.err


def test_redrive_without_a_terminal_needs_yes(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")

    result = sagactl("redrive", CASE)

    assert result.code == 2 and "pass --yes" in result.err
    assert "will rerun:   ReleaseReservation" in result.out  # the plan is shown first
    assert sagactl("status", CASE, "--json").json()["execution"]["redriveCount"] == 0


def test_redrive_finishes_the_compensation_once_and_the_case_escalates(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    stock_before = _stock(saga, SKU)
    run_example(sagactl, saga, "compensation-stuck")
    assert _stock(saga, SKU) == stock_before - 1  # reserved, never released
    stuck = sagactl("status", CASE, "--json").json()
    assert (stuck["status"], stuck["outcome"]) == ("FAILED", "COMPENSATION_PENDING")

    result = sagactl("redrive", CASE, "--yes", "--json")

    assert result.code == 0, result.err
    plan, outcome = result.json()["plan"], result.json()["result"]
    assert (plan["status"], plan["failed_state"], plan["failed_error"]) == (
        "FAILED",
        "ReleaseReservation",
        "OutcomeUnknown",
    )
    [action] = plan["actions"]
    assert action["action_key"] == RELEASE_KEY and action["remaining_budget"] > 0
    assert outcome["redrive"] == 1 and outcome["redrive_date"]
    saga.wait_for_execution(outcome["execution_arn"])
    view = sagactl("status", CASE, "--json").json()
    assert (view["status"], view["outcome"]) == ("SUCCEEDED", "ESCALATED")
    assert view["execution"]["redriveCount"] == 1
    assert view["effects"]["reservation"]["status"] == "RELEASED"
    assert view["effects"]["refunds"] == 1 and view["effects"]["shipments"] == 0
    release = sagactl("ledger", RELEASE_KEY, "--json").json()
    assert release["status"] == "COMPLETED" and release["attempts"] <= release["budget"]
    assert _stock(saga, SKU) == stock_before  # restored exactly once

    again = sagactl("redrive", CASE, "--yes", "--json")
    assert again.code == 3 and "it SUCCEEDED" in again.json()["error"]["message"]
    assert _stock(saga, SKU) == stock_before


def test_redrive_text_output_says_how_to_follow(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")

    result = sagactl("redrive", CASE, "--yes", "--local")

    assert result.code == 0, result.err
    arn = saga.outputs["StateMachineArn"].replace(":stateMachine:", ":execution:") + f":{CASE}"
    assert f"redriven: {arn} (redrive #1)" in result.out
    assert f"follow it with: sagactl watch {CASE} --local" in result.out
    assert saga.wait_for_execution(arn)["status"] == "SUCCEEDED"


def test_redrive_with_no_budget_left_is_refused(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    used = sagactl("ledger", RELEASE_KEY, "--json").json()["attempts"]

    result = sagactl("redrive", CASE, "--yes", "--budget", str(used))

    assert result.code == 3
    assert f"has used {used} of {used} lifetime attempts" in result.err
    assert "BudgetExhausted" in result.err
    assert sagactl("ledger", RELEASE_KEY, "--json").json()["attempts"] == used
    assert sagactl("status", CASE, "--json").json()["execution"]["redriveCount"] == 0
    # `status` and `escalations` say what `redrive` said, never "`sagactl redrive` reruns it".
    status = sagactl("status", CASE, "--budget", str(used))
    assert "a compensation did not finish and a redrive cannot help" in status.out
    assert f"has used {used} of {used} lifetime attempts" in status.out
    assert "reruns it" not in status.out
    verdict = sagactl("status", CASE, "--budget", str(used), "--json").json()["redrive"]
    assert verdict["can_help"] is False and "BudgetExhausted" in verdict["reason"]
    [listed] = sagactl("escalations", "--budget", str(used), "--json").json()["escalations"]
    assert listed["redrive"] == verdict


def test_redrive_past_the_14_day_window_is_refused_by_step_functions(
    saga: LocalAws, sagactl: Sagactl, local_clock: Callable[[float], None]
) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    local_clock(13.9 * 86400)
    assert sagactl("status", CASE, "--json").json()["execution"]["redriveStatus"] == "REDRIVABLE"

    local_clock(14.1 * 86400)
    result = sagactl("redrive", CASE, "--yes", "--json")

    assert result.code == 3
    assert result.json()["error"]["message"] == (
        f"case {CASE}: Step Functions says NOT_REDRIVABLE: Execution redrivable period exceeded"
    )
    assert sagactl("ledger", RELEASE_KEY, "--json").json()["status"] == "UNKNOWN"


def test_plan_refuses_past_the_window_even_when_the_service_does_not_say(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    target = local_target(Path(os.environ["SAGA_LOCAL_OUTPUTS"]), endpoint_url=saga.endpoint)
    stopped = target.client("stepfunctions").describe_execution(
        executionArn=target.execution_arn(CASE)
    )["stopDate"]
    assert isinstance(stopped, dt.datetime)

    plan = plan_redrive(target, CASE, budget=8, now=stopped.timestamp())
    assert plan.failed_step is not None and plan.failed_step.state == "ReleaseReservation"
    with pytest.raises(RedriveRefused, match="closed 15 days ago"):
        plan_redrive(
            target, CASE, budget=8, now=stopped.timestamp() + REDRIVE_WINDOW_SECONDS + 86400
        )


def _rejected(saga: LocalAws, sagactl: Sagactl, tmp_path: Path) -> Path:
    """The happy path's case with its refund edited after the approval, started past the local
    checks: ValidateCase rejects it (ApprovalMismatch) and the execution ends FAILED at
    RejectCase."""
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["refund"]["amount_minor"] += 1
    case_file = tmp_path / "tampered.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")
    started = sagactl("start", str(case_file), "--skip-checks", "--watch", "--timeout", "60")
    assert started.code == 6, started.out + started.err
    return case_file


def test_redrive_of_a_case_validatecase_rejected_is_refused_with_what_to_do(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    _rejected(saga, sagactl, tmp_path)
    depth = _queue_depth(saga)
    assert depth == 1  # the failed-execution rule's message for the rejection

    result = sagactl("redrive", "case-happy-path", "--yes", "--json")

    assert result.code == 3, result.out + result.err
    error = result.json()["error"]
    assert error["type"] == "RedriveRefused"
    assert error["message"].startswith(
        "ValidateCase rejected case case-happy-path (ApprovalMismatch: case case-happy-path: "
        "approval.digest does not match the case parameters"
    )
    assert (
        "nothing was done; correct the case file, approve it as the next revision (`sagactl "
        "case approve FILE --revision 2`) and start it (`sagactl start FILE`). A redrive would "
        "only reject it again"
    ) in error["message"]
    # Nothing was rerun: no redrive, no second rejection, no second message.
    assert sagactl("status", "case-happy-path", "--json").json()["execution"]["redriveCount"] == 0
    assert _queue_depth(saga) == depth
    # `status` says the same, in place of "no case record" alone.
    status = sagactl("status", "case-happy-path")
    last = status.out.rstrip().splitlines()[-1]
    assert last.startswith("outcome: no case record: ValidateCase rejected case case-happy-path ")
    assert "approve it as the next revision (`sagactl case approve FILE --revision 2`)" in (
        status.out
    )
    verdict = sagactl("status", "case-happy-path", "--json").json()
    assert verdict["redrive"] == {"can_help": False, "reason": error["message"]}


def test_a_rejected_key_conflict_says_to_choose_another_case_id(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    run_example(sagactl, saga, "happy-path")
    # Another approved request under the case id the happy path already used.
    case_file = tmp_path / "conflict.json"
    new = [*NEW_CASE, "-o", str(case_file)]
    new[new.index("case-cli-1")] = "case-happy-path"
    assert sagactl(*new).code == 0
    assert sagactl("case", "approve", str(case_file)).code == 0
    arn = start_execution(saga, "case-happy-path-again", f"file://{case_file}")
    assert saga.wait_for_execution(arn)["error"] == "KeyConflict"

    result = sagactl("redrive", "case-happy-path-again", "--yes")

    assert result.code == 3, result.out + result.err
    assert "ValidateCase rejected case case-happy-path (KeyConflict: " in result.err
    assert (
        "the case id belongs to another approved case (`sagactl status case-happy-path` shows "
        "it): give the corrected case a new case id, approve it and start it"
    ) in result.err


def _queue_depth(local: LocalAws) -> int:
    attributes = local.client("sqs").get_queue_attributes(
        QueueUrl=local.outputs["EscalationQueueUrl"],
        AttributeNames=["ApproximateNumberOfMessages"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])
