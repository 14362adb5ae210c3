"""Error routing of the rendered definition (docs/design.md §4): the rules whose breakage only one
scenario would show, checked on every state at once.

- every forward step sends an uncertain outcome (OutcomeUnknown, BudgetExhausted,
  ReplayWindowExpired, States.Timeout, and every name of a function that died after it may have
  dispatched: Sandbox.Timedout, Runtime.ExitError, Runtime.OutOfMemory, Lambda.Unknown) to
  ReconcileStep, never past it;
- the compensation has no Catch for those: retries, then FAILED at that task (redrivable);
- every Catch and Retry handles the names of a function that died all alike, or none of them;
- every Lambda task retries the invoke-level faults AWS recommends retrying;
- a new execution of a recorded case goes from ValidateCase to a Succeed state, never forward.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.lambda_errors import LAMBDA_CRASH_ERRORS, LAMBDA_INVOKE_ERRORS
from stacks.workflow_policy import is_lambda_task, iter_states
from tests.infra.synth import Synthesized

STEP_NAMES = {"ReserveStock": "reserve", "IssueRefund": "refund", "CreateShipment": "ship"}
FORWARD_STEPS = tuple(STEP_NAMES)
CRASHED = {"Sandbox.Timedout", "Runtime.ExitError", "Runtime.OutOfMemory", "Lambda.Unknown"}
UNCERTAIN = {"OutcomeUnknown", "BudgetExhausted", "ReplayWindowExpired", "States.Timeout", *CRASHED}


@pytest.fixture(scope="module")
def states(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    (machine,) = synthesized.resources("AWS::StepFunctions::StateMachine").values()
    return dict(iter_states(json.loads(machine["Properties"]["DefinitionString"])))


@pytest.mark.parametrize("step", FORWARD_STEPS)
def test_an_uncertain_forward_step_goes_to_reconciliation(
    states: dict[str, dict[str, Any]], step: str
) -> None:
    catchers = states[step]["Catch"]
    routed = {error: catcher["Next"] for catcher in catchers for error in catcher["ErrorEquals"]}
    assert {error: routed.get(error) for error in UNCERTAIN} == dict.fromkeys(
        UNCERTAIN, "ReconcileStep"
    )
    assert "States.ALL" not in routed and "States.TaskFailed" not in routed
    # The reconcile task learns which step it settles.
    (uncertain,) = [c for c in catchers if "OutcomeUnknown" in c["ErrorEquals"]]
    assert uncertain["Assign"] == {
        "reconciling": {
            "ReserveStock": "reserve",
            "IssueRefund": "refund",
            "CreateShipment": "ship",
        }[step]
    }


def test_the_compensation_fails_at_its_task_when_it_cannot_finish(
    states: dict[str, dict[str, Any]],
) -> None:
    release = states["ReleaseReservation"]
    caught = {error for catcher in release.get("Catch", []) for error in catcher["ErrorEquals"]}
    assert not caught & (UNCERTAIN | {"TransientError", "States.ALL", "States.TaskFailed"})
    retried = {error for retrier in release["Retry"] for error in retrier["ErrorEquals"]}
    assert {"TransientError", "OutcomeUnknown", "States.Timeout", *CRASHED} <= retried


def test_every_catch_and_retry_routes_a_function_that_died_whole(
    states: dict[str, dict[str, Any]],
) -> None:
    """One name of the family missing from a handler would end the execution FAILED (a forward
    step's effect unreconciled) when Lambda happens to report that name."""
    assert set(LAMBDA_CRASH_ERRORS) == CRASHED
    handlers = [
        (name, field, handler["ErrorEquals"])
        for name, state in states.items()
        for field in ("Retry", "Catch")
        for handler in state.get(field, [])
    ]
    assert len(handlers) > 20
    partial = [h for h in handlers if set(h[2]) & CRASHED and not set(h[2]) >= CRASHED]
    assert partial == []
    routing = [(name, field) for name, field, errors in handlers if set(errors) >= CRASHED]
    assert routing == [
        ("ReserveStock", "Catch"),
        ("IssueRefund", "Catch"),
        ("CreateShipment", "Catch"),
        ("ReleaseReservation", "Retry"),
    ]


def test_every_lambda_task_retries_the_invoke_level_faults(
    states: dict[str, dict[str, Any]],
) -> None:
    assert "Lambda.ClientExecutionTimeoutException" in LAMBDA_INVOKE_ERRORS
    lambda_tasks = {
        name: s for name, s in states.items() if s["Type"] == "Task" and is_lambda_task(s)
    }
    assert len(lambda_tasks) == 7
    for name, state in lambda_tasks.items():
        retried = {error for retrier in state["Retry"] for error in retrier["ErrorEquals"]}
        assert set(LAMBDA_INVOKE_ERRORS) <= retried, name


def test_a_duplicate_execution_ends_succeeded_before_any_effect(
    states: dict[str, dict[str, Any]],
) -> None:
    assert states["ValidateCase"]["Next"] == "NewOrDuplicate"
    choice = states["NewOrDuplicate"]
    assert choice["Choices"] == [{"Condition": "{% $duplicate %}", "Next": "DuplicateCase"}]
    assert choice["Default"] == "ReserveStock"
    duplicate = states["DuplicateCase"]
    assert duplicate["Type"] == "Succeed"
    assert "'outcome': 'DUPLICATE'" in duplicate["Output"]


def test_a_rejection_while_reconciling_releases_only_this_cases_reservation(
    states: dict[str, dict[str, Any]],
) -> None:
    """KeyConflict at ReconcileStep for the refund or the shipment comes after this case's own
    reservation, which is released as at IssueRefund; for the reservation itself the key holds
    another request's reservation, which is left alone."""
    (rejected,) = [c for c in states["ReconcileStep"]["Catch"] if "KeyConflict" in c["ErrorEquals"]]
    assert rejected["Next"] == "AfterRejectedReconcile"
    choice = states["AfterRejectedReconcile"]
    assert choice["Choices"] == [
        {"Condition": "{% $reconciling = 'reserve' %}", "Next": "Escalate"}
    ]
    assert choice["Default"] == "ReleaseReservation"


def test_a_settled_action_ends_the_execution_at_its_task(
    states: dict[str, dict[str, Any]],
) -> None:
    """ActionSettled (a person has decided the action) is neither retried nor caught at a task
    that runs a ledger action: a redrive or a late delivery after the decision ends FAILED
    there, with nothing dispatched, instead of compensating or escalating a decided case."""
    ledger_tasks = (*FORWARD_STEPS, "ReleaseReservation")
    for name in ledger_tasks:
        state = states[name]
        handled = {
            error
            for handler in (*state.get("Retry", []), *state.get("Catch", []))
            for error in handler["ErrorEquals"]
        }
        assert not handled & {"ActionSettled", "States.ALL", "States.TaskFailed"}, name
