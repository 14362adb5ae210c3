"""The reference JSONata (npm `jsonata` 2.0.6, the version AWS documents) and the walk that finds
every expression AWS parses in a definition, at the location AWS reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local_aws import jsonata_reference
from local_aws.definition_validation import (
    INVALID_JSON_DESCRIPTION,
    INVALID_JSONATA_EXPRESSION,
    MISSING_DESCRIPTION,
    SCHEMA_VALIDATION_FAILED,
    invalid_definition_message,
    jsonata_expressions,
    validate_definition,
)
from local_aws.jsonata_reference import (
    ParseError,
    ReferenceJsonataUnavailable,
    evaluate_all,
    parse_errors,
    reference_version,
)

ROOT = Path(__file__).resolve().parents[2]
AWS_DOCUMENTED_JSONATA = "2.0.6"


def test_jsonata_2_0_6_is_a_direct_exact_dev_dependency_and_what_the_script_loads() -> None:
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    assert package["devDependencies"]["jsonata"] == AWS_DOCUMENTED_JSONATA
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"][""]["devDependencies"]["jsonata"] == AWS_DOCUMENTED_JSONATA
    assert lock["packages"]["node_modules/jsonata"]["version"] == AWS_DOCUMENTED_JSONATA
    # asl-validator wants ^2.0.6 and must not bring its own copy that our script could load.
    assert "node_modules/asl-validator/node_modules/jsonata" not in lock["packages"]
    assert reference_version() == AWS_DOCUMENTED_JSONATA


def test_parse_errors_answers_a_batch_in_order() -> None:
    assert parse_errors(["$states.input.a", "a[1,2)", "'action\\'s'", "{'a': 1}"]) == [
        None,
        ParseError("S0202", 'Expected "]", got ","', 4),
        ParseError("S0103", 'Unsupported escape sequence: \\"\'"', 8),
        None,
    ]


def test_evaluate_all_answers_values_undefined_and_errors() -> None:
    value, undefined, error, hashed = evaluate_all(
        ["($x := 2; {'n': $x * 1000})", "$nothing", "$error('boom')", "$hash('a', 'SHA-256')"]
    )
    assert value.value == {"n": 2000} and not value.failed
    assert undefined.undefined
    assert error.failed and error.error_code == "D3137" and error.error_message == "boom"
    assert hashed.value == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"


def test_a_missing_node_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("local_aws.jsonata_reference.shutil.which", lambda *_, **__: None)
    with pytest.raises(ReferenceJsonataUnavailable, match=r"Node\.js is not on PATH"):
        parse_errors(["1"])


def test_a_missing_npm_package_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = tmp_path / "reference_jsonata.js"  # resolves `jsonata` from a tree without it
    script.write_text((jsonata_reference.SCRIPT).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(jsonata_reference, "SCRIPT", script)
    with pytest.raises(ReferenceJsonataUnavailable, match="Cannot find module 'jsonata'"):
        parse_errors(["1"])


def _pass_with(**fields: Any) -> dict[str, Any]:
    return {
        "QueryLanguage": "JSONata",
        "StartAt": "E",
        "States": {"E": {"Type": "Pass", **fields, "End": True}},
    }


def _locations(definition: dict[str, Any]) -> dict[str, str]:
    return {e.location: e.text for e in jsonata_expressions(definition)}


def test_locations_are_the_ones_aws_reports() -> None:
    definition = {
        "QueryLanguage": "JSONata",
        "Comment": "{% not an expression %}",
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Comment": "{% plain text %}",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Arguments": {"FunctionName": "f", "Payload": {"Comment": "{% $a %}"}},
                "Retry": [{"ErrorEquals": ["{% text %}"], "MaxAttempts": 1}],
                "Catch": [
                    {
                        "ErrorEquals": ["States.ALL"],
                        "Comment": "{% text %}",
                        "Assign": {"Retry": "{%  $states.errorOutput  %}"},
                        "Output": {"a": {"b": ["x", "{% 1 %}"]}},
                        "Next": "C",
                    }
                ],
                "Next": "C",
            },
            "C": {
                "Type": "Choice",
                "Choices": [{"Condition": "{% $b %}", "Assign": {"v": "{% 2 %}"}, "Next": "P"}],
                "Default": "P",
            },
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "B", "States": {"B": {"Type": "Fail", "Cause": "{% 3 %}"}}}
                ],
                "Next": "M",
            },
            "M": {
                "Type": "Map",
                "Items": "{% $c %}",
                "ItemProcessor": {
                    "StartAt": "I",
                    "States": {"I": {"Type": "Wait", "Seconds": "{% 4 %}", "End": True}},
                },
                "End": True,
            },
        },
    }
    assert _locations(definition) == {
        "/States/T/Arguments/Payload/Comment": "$a",
        "/States/T/Catch[0]/Assign/Retry": "$states.errorOutput",
        "/States/T/Catch[0]/Output/a/b[1]": "1",
        "/States/C/Choices[0]/Condition": "$b",
        "/States/C/Choices[0]/Assign/v": "2",
        "/States/P/Branches[0]/States/B/Cause": "3",
        "/States/M/Items": "$c",
        "/States/M/ItemProcessor/States/I/Seconds": "4",
    }


def test_jsonpath_states_keep_braces_as_text() -> None:
    jsonpath: dict[str, Any] = {
        "StartAt": "E",
        "States": {"E": {"Type": "Pass", "Result": "{% x %}", "End": True}},
    }
    assert _locations(jsonpath) == {}
    mixed = {**jsonpath, "States": {"E": {**jsonpath["States"]["E"], "QueryLanguage": "JSONata"}}}
    assert _locations(mixed) == {"/States/E/Result": "x"}
    not_whole = _pass_with(Output={"v": "a {% x %}", "w": "{% x %} b"})
    assert _locations(not_whole) == {}


def test_every_refusal_is_reported_with_aws_shapes() -> None:
    definition = _pass_with(Output={"v": "{% a[1,2) %}", "w": "{% 1 + %}", "ok": "{% 1 %}"})
    diagnostics = validate_definition(json.dumps(definition))
    assert [(d.severity, d.code, d.message, d.location) for d in diagnostics] == [
        ("ERROR", INVALID_JSONATA_EXPRESSION, 'Expected "]", got ","', "/States/E/Output/v"),
        ("ERROR", INVALID_JSONATA_EXPRESSION, "Unexpected end of expression", "/States/E/Output/w"),
    ]
    assert invalid_definition_message(diagnostics) == (
        "Invalid State Machine Definition: "
        '\'INVALID_JSONATA_EXPRESSION: Expected "]", got "," at /States/E/Output/v, '
        "INVALID_JSONATA_EXPRESSION: Unexpected end of expression at /States/E/Output/w'"
    )


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", MISSING_DESCRIPTION),
        ("{not json", INVALID_JSON_DESCRIPTION),
        ("[]", SCHEMA_VALIDATION_FAILED),
        (
            json.dumps({"StartAt": "E", "States": {"E": {"Type": "Teleport"}}}),
            SCHEMA_VALIDATION_FAILED,
        ),
    ],
)
def test_what_is_not_a_definition_is_refused_too(text: str, code: str) -> None:
    (diagnostic,) = validate_definition(text)
    assert diagnostic.code == code
    assert diagnostic.location is None
