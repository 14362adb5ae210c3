"""`sagactl redrive`: refusals with reasons, and the local emulation of the failed step."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from sagactl.errors import RedriveRefused
from sagactl.local.environment import LocalAws
from sagactl.redrive import REDRIVE_WINDOW_SECONDS, plan_redrive
from sagactl.target import local_target
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl, scan

__all__ = ["saga", "sagactl"]

RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"


def _stock(local: LocalAws, sku: str) -> int:
    items = scan(local, "InventoryTableName")
    return next(int(i["available"]["N"]) for i in items if i["sku"]["S"] == sku)


def test_redrive_of_a_succeeded_case_is_refused(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "happy-path")

    result = sagactl("redrive", "case-happy-path", "--yes", "--emulate", "--json")

    assert result.code == 3
    error = result.json()["error"]
    assert error["type"] == "RedriveRefused"
    assert "it SUCCEEDED; there is nothing to rerun" in error["message"]


def test_redrive_of_an_unknown_case(saga: LocalAws, sagactl: Sagactl) -> None:
    result = sagactl("redrive", "no-such-case", "--yes")

    assert result.code == 1 and "no execution for case no-such-case" in result.err


def test_local_redrive_says_the_emulator_cannot_and_changes_nothing(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    before = sagactl("ledger", RELEASE_KEY, "--json").json()

    result = sagactl("redrive", "case-compensation-stuck", "--yes")

    assert result.code == 3
    assert "has no RedriveExecution" in result.err and "--emulate" in result.err
    assert sagactl("ledger", RELEASE_KEY, "--json").json()["attempts"] == before["attempts"]


def test_redrive_without_a_terminal_needs_yes(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")

    result = sagactl("redrive", "case-compensation-stuck", "--emulate")

    assert result.code == 2 and "pass --yes" in result.err
    assert "will rerun:   ReleaseReservation" in result.out  # the plan is shown first


def test_emulated_redrive_finishes_the_compensation_once(saga: LocalAws, sagactl: Sagactl) -> None:
    sku = "SKU-RED-MUG"
    stock_before = _stock(saga, sku)
    run_example(sagactl, saga, "compensation-stuck")
    assert _stock(saga, sku) == stock_before - 1  # reserved, never released
    assert sagactl("status", "case-compensation-stuck", "--json").json()["outcome"] == (
        "COMPENSATION_PENDING"
    )

    result = sagactl("redrive", "case-compensation-stuck", "--emulate", "--yes", "--json")

    assert result.code == 0, result.err
    plan, outcome = result.json()["plan"], result.json()["result"]
    assert (plan["status"], plan["failed_state"], plan["failed_error"]) == (
        "FAILED",
        "ReleaseReservation",
        "OutcomeUnknown",
    )
    [action] = plan["actions"]
    assert action["action_key"] == RELEASE_KEY and action["remaining_budget"] > 0
    assert outcome["emulated"] is True and outcome["succeeded"] is True
    assert outcome["redrive"] == 1
    assert [i["retry"] for i in outcome["invocations"]] == list(range(len(outcome["invocations"])))
    after = outcome["actions"][0]["after"]
    assert after["status"] == "COMPLETED"
    assert after["attempts"] <= after["budget"]
    assert _stock(saga, sku) == stock_before  # restored exactly once
    view = sagactl("status", "case-compensation-stuck", "--json").json()
    assert view["effects"]["reservation"]["status"] == "RELEASED"
    assert view["status"] == "FAILED"  # emulation reruns the failed step only

    again = sagactl("redrive", "case-compensation-stuck", "--emulate", "--yes", "--json")
    assert again.json()["result"]["actions"][0]["after"]["status"] == "COMPLETED"
    assert _stock(saga, sku) == stock_before  # a replay restores nothing twice


def test_redrive_with_no_budget_left_is_refused(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    used = sagactl("ledger", RELEASE_KEY, "--json").json()["attempts"]

    result = sagactl(
        "redrive", "case-compensation-stuck", "--emulate", "--yes", "--budget", str(used)
    )

    assert result.code == 3
    assert f"has used {used} of {used} lifetime attempts" in result.err
    assert "BudgetExhausted" in result.err
    assert sagactl("ledger", RELEASE_KEY, "--json").json()["attempts"] == used


def test_redrive_past_the_14_day_window_is_refused(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "compensation-stuck")
    target = local_target(
        Path(os.environ["SAGA_LOCAL_OUTPUTS"]),
        endpoint_url=saga.endpoint,
    )
    stopped = target.client("stepfunctions").describe_execution(
        executionArn=target.execution_arn("case-compensation-stuck")
    )["stopDate"]
    assert isinstance(stopped, dt.datetime)

    plan = plan_redrive(target, "case-compensation-stuck", budget=8, now=stopped.timestamp())
    assert plan.failed_step is not None and plan.failed_step.state == "ReleaseReservation"
    with pytest.raises(RedriveRefused, match="closed 15 days ago"):
        plan_redrive(
            target,
            "case-compensation-stuck",
            budget=8,
            now=stopped.timestamp() + REDRIVE_WINDOW_SECONDS + 86400,
        )
