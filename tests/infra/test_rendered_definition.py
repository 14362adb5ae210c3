"""The rendered state machine definition (the synthesized template's, after workflow_policy
injected Retry and timeouts) holds only what AWS accepts at CreateStateMachine.

- every `{% ... %}` expression, wherever it stands, parses with the reference JSONata (jsonata-js
  2.0.6, the version AWS documents): AWS parses them all when the state machine is created;
- no Choice state has a state-level `Assign`: AWS applies it whatever rule matches (docs/design.md
§7),
  so a state-level Assign meant for the Default path would run on every path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from local_aws.definition_validation import (
    INVALID_JSONATA_EXPRESSION,
    jsonata_expressions,
    validate_definition,
)
from local_aws.jsonata_reference import parse_errors
from stacks.workflow_policy import iter_states
from tests.infra.synth import Synthesized
from tests.old_escape import CATCH_ALL, FIXED_TEXT, OLD_ESCAPE


def rendered_text(synthesized: Synthesized) -> str:
    (machine,) = synthesized.resources("AWS::StepFunctions::StateMachine").values()
    text = machine["Properties"]["DefinitionString"]
    assert isinstance(text, str), "the definition is expected as one string with ${...} slots"
    return text


@pytest.fixture(scope="module")
def rendered(synthesized: Synthesized) -> dict[str, Any]:
    definition: dict[str, Any] = json.loads(rendered_text(synthesized))
    return definition


def test_every_expression_of_the_rendered_definition_parses_with_the_reference(
    synthesized: Synthesized, rendered: dict[str, Any]
) -> None:
    expressions = list(jsonata_expressions(rendered))
    # Found all of them: one per string value that opens with {% in the template's text.
    assert len(expressions) == rendered_text(synthesized).count('"{%')
    # Wherever they stand: task arguments, outputs, state and Catch Assigns, Choice rules, Fail.
    shapes = {re.sub(r"\[\d+\]", "[]", e.location.split("/", 3)[3]) for e in expressions}
    assert {
        "Arguments/Payload",
        "Output",
        "Assign/steps",
        "Catch[]/Assign/escalation",
        "Choices[]/Condition",
        "Choices[]/Assign/steps",
        "Error",
        "Cause",
    } <= shapes, shapes

    errors = parse_errors([e.text for e in expressions])
    refused = [
        f"{e.location}: {error.code} {error.message}"
        for e, error in zip(expressions, errors, strict=True)
        if error is not None
    ]
    assert refused == []


def test_the_old_escape_in_the_catch_all_is_refused_where_it_stands(
    synthesized: Synthesized,
) -> None:
    text = rendered_text(synthesized)
    assert text.count(FIXED_TEXT) == 1
    broken = text.replace(FIXED_TEXT, OLD_ESCAPE)

    diagnostics = validate_definition(broken)

    assert [(d.code, d.location) for d in diagnostics] == [(INVALID_JSONATA_EXPRESSION, CATCH_ALL)]
    assert diagnostics[0].message == 'Unsupported escape sequence: \\"\'"'
    assert validate_definition(text) == ()


def choices_with_state_level_assign(definition: dict[str, Any]) -> list[str]:
    return [
        name
        for name, state in iter_states(definition)
        if state["Type"] == "Choice" and "Assign" in state
    ]


def test_no_choice_state_has_a_state_level_assign(rendered: dict[str, Any]) -> None:
    choices = [name for name, state in iter_states(rendered) if state["Type"] == "Choice"]
    assert "AfterReconcile" in choices
    assert choices_with_state_level_assign(rendered) == []


def test_the_choice_check_finds_a_state_level_assign_at_any_depth(
    rendered: dict[str, Any],
) -> None:
    broken = json.loads(json.dumps(rendered))
    broken["States"]["AfterReconcile"]["Assign"] = {"escalation": "{% 'meant for Default' %}"}
    nested = {"StartAt": "C", "States": {"C": {"Type": "Choice", "Choices": [], "Assign": {}}}}
    broken["States"]["Wrapper"] = {"Type": "Parallel", "Branches": [nested], "End": True}
    assert choices_with_state_level_assign(broken) == ["AfterReconcile", "C"]
