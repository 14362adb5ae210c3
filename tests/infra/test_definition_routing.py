"""Error routing of the rendered definition (docs/design.md §4): the rules whose breakage only one
scenario would show, checked on every state at once.

- every forward step sends an uncertain outcome (OutcomeUnknown, BudgetExhausted,
  ReplayWindowExpired, States.Timeout, and every name of a function that died after it may have
  dispatched: Sandbox.Timedout, Runtime.ExitError, Runtime.OutOfMemory, Lambda.Unknown) to
  ReconcileStep, never past it;
- the compensation has no Catch for those: retries, then FAILED at that task (redrivable);
- every Catch and Retry handles the names of a function that died all alike, or none of them;
- every Lambda task retries the invoke-level faults AWS recommends retrying;
- a new execution of a recorded case goes from ValidateCase to a Succeed state, never forward;
- the shipment ends the execution with the case's outcome (written with it);
- an execution that meets a person's decision ends with the one error the failed-execution rule
  excludes (ActionSettled), whether a task fails with it or a Catch ends at a Fail state.
- every error a Catch or Retry names is a tool's (saga.errors) or AWS's;
- a refund the daily ceiling refused is released and escalated with its numbers (§3.12).
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import ANY

import pytest

from local_aws import jsonata_eval
from local_aws.jsonata_reference import evaluate_all
from saga.ceilings import limit_reached
from saga.errors import (
    DUPLICATE_OF_EXECUTION,
    ActionSettled,
    BusinessRejection,
    RefundLimitReached,
    SagaError,
)
from stacks.constructs.escalation import RESOLVED_CASE_ERROR
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
    assert len(lambda_tasks) == 8  # every Task: Escalate is RecordOutcome's invocation too
    assert set(lambda_tasks) == {n for n, s in states.items() if s["Type"] == "Task"}
    for name, state in lambda_tasks.items():
        retried = {error for retrier in state["Retry"] for error in retrier["ErrorEquals"]}
        assert set(LAMBDA_INVOKE_ERRORS) <= retried, name


def test_a_duplicate_execution_ends_succeeded_before_any_effect(
    states: dict[str, dict[str, Any]],
) -> None:
    """DuplicateExecution is caught from ValidateCase to a Succeed state (the happy path enters
    no state for it), never retried, and nothing but ValidateCase raises it."""
    validate = states["ValidateCase"]
    assert validate["Next"] == "ReserveStock"
    (caught,) = [c for c in validate["Catch"] if "DuplicateExecution" in c["ErrorEquals"]]
    assert (caught["ErrorEquals"], caught["Next"]) == (["DuplicateExecution"], "DuplicateCase")
    assert "'outcome': 'DUPLICATE'" in caught["Output"]
    assert f"'{DUPLICATE_OF_EXECUTION}'" in caught["Output"]
    assert states["DuplicateCase"] == {"Type": "Succeed", "Comment": ANY}
    for name, state in states.items():
        retried = {e for retrier in state.get("Retry", []) for e in retrier["ErrorEquals"]}
        assert "DuplicateExecution" not in retried, name
        if name != "ValidateCase":
            assert all("DuplicateExecution" not in c["ErrorEquals"] for c in state.get("Catch", []))


def test_the_shipment_ends_the_execution_with_the_case_outcome(
    states: dict[str, dict[str, Any]],
) -> None:
    """The case record's COMPLETED is written with the shipment (docs/design.md §3.11), so the
    last step ends the execution with the §8 output; RecordOutcome remains for the paths that
    escalate, compensate or reconcile. A case record that refuses it ends the execution FAILED
    there (CaseRecordRefused is neither retried nor caught)."""
    ship = states["CreateShipment"]
    assert ship.get("End") is True and "Next" not in ship and "Assign" not in ship
    assert ship["Output"].startswith("{% {'case_id': $case.case_id, 'outcome': 'COMPLETED', ")
    handled = {
        error for handler in (*ship["Retry"], *ship["Catch"]) for error in handler["ErrorEquals"]
    }
    assert not handled & {"CaseRecordRefused", "States.ALL", "States.TaskFailed"}
    into_record_outcome = sorted(
        {
            name
            for name, state in states.items()
            for target in _targets(state)
            if target == "RecordOutcome"
        }
    )
    assert into_record_outcome == ["AfterReconcile"]
    record = states["RecordOutcome"]["Arguments"]["Payload"]
    assert "'outcome': 'COMPLETED'" in record and "'escalation': null" in record


def test_the_escalation_is_queued_by_a_function_that_refuses_a_resolved_case(
    states: dict[str, dict[str, Any]],
) -> None:
    """Escalate invokes RecordOutcome, which writes the case record ESCALATED (refused with
    ActionSettled once a person resolved the case, docs/design.md §3.10) before it queues
    CASE_ESCALATED: no state sends to SQS itself, so a redrive of an execution stopped at
    Escalate cannot message about a decided case. ActionSettled is neither retried nor caught
    there, and the escalation ends the execution with RecordOutcome's output."""
    escalate = states["Escalate"]
    assert escalate["Arguments"]["FunctionName"] == "${RecordOutcomeFunctionArn}"
    assert "'outcome': 'ESCALATED'" in escalate["Arguments"]["Payload"]
    assert "'escalation': $escalation" in escalate["Arguments"]["Payload"]
    assert (escalate.get("End"), escalate["Output"]) == (True, "{% $states.result.Payload %}")
    assert "Catch" not in escalate
    retried = {error for retrier in escalate["Retry"] for error in retrier["ErrorEquals"]}
    assert "ActionSettled" not in retried and not retried & {"States.ALL", "States.TaskFailed"}
    assert not [n for n, s in states.items() if "sqs:" in s.get("Resource", "")]


def _targets(state: dict[str, Any]) -> list[str]:
    found = [state.get("Next"), state.get("Default")]
    found += [rule.get("Next") for rule in state.get("Choices", [])]
    found += [catcher.get("Next") for catcher in state.get("Catch", [])]
    return [target for target in found if target]


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


def test_an_execution_that_meets_a_decision_ends_with_the_error_the_rule_excludes(
    states: dict[str, dict[str, Any]], synthesized: Synthesized
) -> None:
    """Issue 41, item 6: a task that meets a person's decision fails with the ledger's error
    class, ActionSettled (a Lambda error's type is the class name); where a Catch takes it, the
    Fail state it leads to ends the execution with that same error. The failed-execution rule
    excludes exactly that error, so such an execution queues no message and pages nobody (the
    alarm reads the rule's TriggeredRules) for a decision already made (docs/design.md §3.10)."""
    settled = ActionSettled.__name__
    assert settled == RESOLVED_CASE_ERROR
    rule_id = synthesized.logical_id(synthesized.saga.stack.escalation.unsuccessful_execution_rule)
    rule = synthesized.resources("AWS::Events::Rule")[rule_id]["Properties"]["EventPattern"]
    excluded = [
        value
        for clause in rule["detail"]["$or"]
        for matcher in clause.get("error", [])
        if isinstance(matcher, dict)
        for value in matcher.get("anything-but", [])
    ]
    assert excluded == [settled]
    caught = {
        (name, catcher["Next"]): catcher["ErrorEquals"]
        for name, state in states.items()
        for catcher in state.get("Catch", [])
        if settled in catcher["ErrorEquals"]
    }
    assert caught, "no state catches a decision: then none needs a Fail state of its own"
    for (name, target), errors in caught.items():
        assert errors == [settled], name  # nothing else is routed there
        ending = states[target]
        assert (ending["Type"], ending["Error"]) == ("Fail", settled), (name, target)
    # No other Fail state claims the decision's error.
    decided = {name for name, state in states.items() if state.get("Error") == settled}
    assert decided == {target for _, target in caught}


def test_every_error_the_definition_names_is_one_a_tool_raises_or_aws_reports(
    states: dict[str, dict[str, Any]],
) -> None:
    """A Catch or Retry matches an error by the name of its class (docs/design.md §4): a name
    that is not a SagaError of saga.errors, nor Step Functions' or Lambda's, would never match."""
    named = {
        error
        for state in states.values()
        for handler in (*state.get("Retry", []), *state.get("Catch", []))
        for error in handler["ErrorEquals"]
    }
    tools = {cls.__name__ for cls in _subclasses(SagaError)}
    aws = {e for e in named if e.startswith("States.")} | set(LAMBDA_INVOKE_ERRORS)
    assert named - tools - aws - set(LAMBDA_CRASH_ERRORS) == set()
    assert "RefundLimitReached" in named and issubclass(RefundLimitReached, BusinessRejection)


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set(cls.__subclasses__())
    return found.union(*(_subclasses(sub) for sub in found))


@pytest.mark.parametrize("state", ["IssueRefund", "ReconcileStep"])
def test_a_refund_the_daily_ceiling_refused_is_released_and_escalated_with_the_numbers(
    states: dict[str, dict[str, Any]], state: str
) -> None:
    """RefundLimitReached (docs/design.md §3.12), raised by IssueRefund or replayed from the
    ledger to ReconcileStep, routes like a refused refund: the reservation released, the case
    escalated, here with reason REFUND_LIMIT_REACHED and the numbers the message ends with."""
    (caught,) = [c for c in states[state]["Catch"] if "RefundLimitReached" in c["ErrorEquals"]]
    assert (caught["ErrorEquals"], caught["Next"]) == (["RefundLimitReached"], "ReleaseReservation")
    limit = limit_reached("acme", "USD", ceiling=10_000, used=9_800, asked=700, day="2026-03-01")
    cause = json.dumps({"errorType": "RefundLimitReached", "errorMessage": limit.message})
    states_value = {"errorOutput": {"Error": "RefundLimitReached", "Cause": cause}}
    expression = caught["Assign"]["escalation"].removeprefix("{%").removesuffix("%}")
    # As moto composes it: Step Functions' $parse declared, then $states.
    text = (
        "($parse := function($v){ $eval($v) }; "
        f"$states := {json.dumps(states_value)}; {expression})"
    )
    escalation = jsonata_eval.evaluate(text)
    (reference,) = evaluate_all([text])
    assert reference.value == escalation, reference
    assert escalation["reason"] == "REFUND_LIMIT_REACHED" and escalation["step"] == "refund"
    assert escalation["detail"] == limit.message
    assert escalation["limit"] == {
        "ceiling": 10_000,
        "used": 9_800,
        "asked": 700,
        "currency": "USD",
        "day": "2026-03-01",
    }
    retried = {e for retrier in states[state]["Retry"] for e in retrier["ErrorEquals"]}
    assert "RefundLimitReached" not in retried
