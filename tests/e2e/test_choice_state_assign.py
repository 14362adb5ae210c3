"""A Choice state's own `Assign` applies whatever rule matches, as AWS documents it (moto applied
it on the Default path only); a matched rule's Assign wins for a variable both assign; every
Assign reads the variables as they were when the state was entered (local_aws/choice_assign.py
cites the sources). The saga's AfterReconcile relied on moto's reading: on AWS every RESUME
would have recorded the case ESCALATED."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local_aws.environment import LocalAws
from tests.e2e.test_saga_paths import Saga, load_example

ROLE = "arn:aws:iam::123456789012:role/saga-local-execution-role"
CHOICE_MACHINE = {
    "QueryLanguage": "JSONata",
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Assign": {"counter": 1, "both": "init"}, "Next": "C"},
        "C": {
            "Type": "Choice",
            "Choices": [
                {
                    "Condition": "{% $states.input.path = 'rule' %}",
                    "Assign": {"picked": "rule", "both": "rule", "seen": "{% $counter %}"},
                    "Next": "Done",
                },
                {"Condition": "{% $states.input.path = 'bare' %}", "Next": "Done"},
            ],
            "Default": "Fallback",
            "Assign": {"state_level": "state", "both": "state", "counter": "{% $counter + 1 %}"},
        },
        "Fallback": {"Type": "Pass", "Next": "Done"},
        "Done": {
            "Type": "Pass",
            "Output": (
                "{% {'state_level': $state_level, 'both': $both, 'counter': $counter,"
                " 'picked': $picked, 'seen': $seen} %}"
            ),
            "End": True,
        },
    },
}


def run_choice(local: LocalAws, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Done state's output, the Choice state's assignedVariables)."""
    sfn = local.client("stepfunctions")
    arn = sfn.create_state_machine(
        name="choice-assign", definition=json.dumps(CHOICE_MACHINE), roleArn=ROLE
    )["stateMachineArn"]
    description, history = local.run_case(
        {"path": path}, name=f"path-{path}", state_machine_arn=arn
    )
    assert description["status"] == "SUCCEEDED", description
    (exited,) = [e for e in history if e["type"] == "ChoiceStateExited"]
    assigned = {
        name: json.loads(value)
        for name, value in exited["stateExitedEventDetails"]["assignedVariables"].items()
    }
    output: dict[str, Any] = json.loads(description["output"])
    return output, assigned


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # A matched rule with its own Assign: both apply, the rule's value wins for `both`, and
        # the rule's `seen` reads $counter as it was on entry (1), not the state-level 2.
        (
            "rule",
            {"state_level": "state", "both": "rule", "counter": 2, "picked": "rule", "seen": 1},
        ),
        # A matched rule without Assign: the state-level Assign still applies.
        ("bare", {"state_level": "state", "both": "state", "counter": 2}),
        # Default.
        ("none", {"state_level": "state", "both": "state", "counter": 2}),
    ],
)
def test_the_state_level_assign_applies_whatever_rule_matches(
    fixture_local_aws: LocalAws, path: str, expected: dict[str, Any]
) -> None:
    output, assigned = run_choice(
        fixture_local_aws, {"rule": "rule", "bare": "bare"}.get(path, "x")
    )
    assert output == expected
    assert assigned == expected


def test_a_resumed_case_is_not_recorded_escalated(local_aws: LocalAws) -> None:
    """RESUME after a lost refund response: AfterReconcile's rule is taken, nothing escalates."""
    saga = Saga(local_aws, load_example("lost-refund-response"))

    assert saga.status == "SUCCEEDED"
    assert "AfterReconcile" in saga.path and "Escalate" not in saga.path
    assert saga.output["outcome"] == "COMPLETED"
    assert saga.output["escalation"] is None
    assert saga.case_outcome() == "COMPLETED"
    assert saga.escalations() == []
    (after,) = [
        e["stateExitedEventDetails"]
        for e in saga.events("ChoiceStateExited")
        if e["stateExitedEventDetails"]["name"] == "AfterReconcile"
    ]
    assert set(after["assignedVariables"]) == {"steps"}


def test_an_uncertain_outcome_still_escalates_with_its_reason(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("carrier-unavailable"))

    assert saga.path[-3:] == ["ReconcileStep", "AfterReconcile", "Escalate"]
    assert saga.output["outcome"] == "ESCALATED"
    escalation = saga.output["escalation"]
    assert (escalation["reason"], escalation["step"]) == ("OUTCOME_UNCERTAIN", "ship")
    assert escalation["decision_needed"].startswith("The ship outcome cannot be established")
