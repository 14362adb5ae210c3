"""Every Catch keeps the variables the states after it read (docs/design.md §4).

A Task whose answer is lost (a function that died, `States.Timeout`) or refused is left by its
Catcher, and only the Catcher's Assign is applied: the state's own Assign is not. So whatever
ReconcileStep, AfterReconcile, the compensation, Escalate and RecordOutcome read after a Catch
must have been assigned before the failed state, or by the Catcher itself. Checked on the
rendered definition (the one the stack deploys), one test per Catcher, with the analysis of
tests/infra/variable_flow.py; and the analysis is shown to find what a Catcher forgot.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stacks.config import SagaConfig
from stacks.constructs.workflow import ASL_PATH
from stacks.workflow_policy import render_definition
from tests.infra.variable_flow import (
    assigned_on_every_path,
    edges,
    expression_reads,
    needed_from,
    unassigned_reads,
)

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
CONTEXT = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
DEFINITION = render_definition(
    json.loads(ASL_PATH.read_text(encoding="utf-8")), SagaConfig.from_mapping(CONTEXT)
)
CATCHES = [edge for edge in edges(DEFINITION["States"]) if edge.label.startswith("Catch")]
# What reconciling a step needs: the case, which step, the steps confirmed so far (RESUME
# merges into them), the action ids (an escalation names the business reference).
RECONCILIATION_READS = {"case", "reconciling", "steps", "actions"}


def test_the_analysis_reads_variables_not_functions_bindings_or_states() -> None:
    expression = (
        "($c := $states.errorOutput.Cause; {'s': $merge([$steps, {'x': $c}]), "
        "'id': $lookup($actions, $reconciling).action_id})"
    )
    assert expression_reads(expression) == {"steps", "actions", "reconciling"}


def test_no_state_reads_a_variable_some_path_into_it_leaves_unassigned() -> None:
    assert unassigned_reads(DEFINITION) == []


@pytest.mark.parametrize("catch", CATCHES, ids=[f"{c.source} {c.label}" for c in CATCHES])
def test_every_catch_keeps_what_the_states_after_it_read(catch: Any) -> None:
    assigned = assigned_on_every_path(DEFINITION)
    needed = needed_from(DEFINITION)
    have = assigned[catch.source] | catch.assigns
    assert needed[catch.target] - have == set(), f"{catch.source} {catch.label} -> {catch.target}"
    assert catch.reads <= assigned[catch.source]
    if catch.target == "ReconcileStep":
        # a lost answer: reconciliation of this step works from what the Catch leaves
        assert RECONCILIATION_READS <= needed["ReconcileStep"] <= have


def test_the_lost_answer_catches_are_the_forward_steps() -> None:
    """The Catchers of a lost answer (a function that died, States.Timeout) go to
    ReconcileStep from every forward step, each naming its step."""
    lost = [
        (c.source, c.assigns)
        for c, raw in zip(CATCHES, _raw_catchers(), strict=True)
        if "States.Timeout" in raw["ErrorEquals"]
    ]
    assert lost == [
        ("ReserveStock", frozenset({"reconciling"})),
        ("IssueRefund", frozenset({"reconciling"})),
        ("CreateShipment", frozenset({"reconciling"})),
    ]


def test_every_way_into_a_compensation_or_an_escalation_says_why() -> None:
    """ValidateCase starts `$escalation` as null (a completed case has none): every path into
    the release and into Escalate must have set a reason since, or the message and the case
    record would say nothing."""
    assigned = assigned_on_every_path(_without_escalation_default(DEFINITION))
    assert "escalation" in assigned["ReleaseReservation"]
    assert "escalation" in assigned["Escalate"]


@pytest.mark.parametrize(
    ("state", "catcher", "dropped", "flagged"),
    [
        # a lost answer: ReconcileStep would not know which step it settles
        ("IssueRefund", "OutcomeUnknown", "reconciling", "ReconcileStep reads $reconciling"),
        ("CreateShipment", "Lambda.Unknown", "reconciling", "ReconcileStep reads $reconciling"),
    ],
)
def test_the_analysis_finds_what_a_catch_forgot(
    state: str, catcher: str, dropped: str, flagged: str
) -> None:
    problems = unassigned_reads(_forgetting(DEFINITION, state, catcher, dropped))
    assert any(problem.startswith(flagged) for problem in problems), problems


def test_the_analysis_finds_an_escalation_without_a_reason() -> None:
    broken = _forgetting(DEFINITION, "IssueRefund", "RefundRejected", "escalation")
    assigned = assigned_on_every_path(_without_escalation_default(broken))
    assert "escalation" not in assigned["ReleaseReservation"]


def _forgetting(definition: Any, state: str, catcher: str, dropped: str) -> Any:
    """The definition with one Catcher's assignment of `dropped` removed."""
    broken = copy.deepcopy(definition)
    for handler in broken["States"][state]["Catch"]:
        if catcher in handler["ErrorEquals"]:
            del handler["Assign"][dropped]
            if not handler["Assign"]:
                del handler["Assign"]
    return broken


def _without_escalation_default(definition: Any) -> Any:
    changed = copy.deepcopy(definition)
    del changed["States"]["ValidateCase"]["Assign"]["escalation"]
    return changed


def _raw_catchers() -> list[dict[str, Any]]:
    return [
        catcher
        for state in DEFINITION["States"].values()
        if state.get("Type") != "Choice"
        for catcher in state.get("Catch", [])
    ]
