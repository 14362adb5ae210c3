"""The definition checks AWS makes at CreateStateMachine, UpdateStateMachine and
ValidateStateMachineDefinition, for the local AWS.

AWS refuses a definition whose JSONata does not parse: CreateStateMachine / UpdateStateMachine
answer `InvalidDefinition` with `Invalid State Machine Definition: 'INVALID_JSONATA_EXPRESSION:
<message> at <location>'`, and ValidateStateMachineDefinition answers `result: FAIL` with one
diagnostic per problem (severity, code, message without the jsonata `S0xxx` code, location such as
`/States/E/Catch[0]/Assign/v`). Shapes measured against AWS by floci-io/floci (issue #2745, PR
#2786 and its tests `StepFunctionsTopLevelReferenceIntegrationTest`). moto parses the ASL
grammar only; here the reference JSONata parser (jsonata-js 2.0.6) checks every expression too.

Results are cached by the definition's SHA-256: re-provisioning the same definition (each test
does) costs a hash and a lookup, not a Node run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from local_aws.jsonata_reference import parse_errors, reference_version

ERROR = "ERROR"
INVALID_JSON_DESCRIPTION = "INVALID_JSON_DESCRIPTION"
MISSING_DESCRIPTION = "MISSING_DESCRIPTION"
SCHEMA_VALIDATION_FAILED = "SCHEMA_VALIDATION_FAILED"
INVALID_JSONATA_EXPRESSION = "INVALID_JSONATA_EXPRESSION"
DEFAULT_MAX_RESULTS = 100

_EXPRESSION = re.compile(r"\A\{%(?P<body>.*)%\}\Z", re.DOTALL)
# Fields that name states, errors or resources: AWS keeps a {% %} string there as plain text.
# Skipped only where the ASL defines them, never inside a payload (Arguments, Output, Assign...).
_NOT_EXPRESSIONS = frozenset(
    {"Comment", "Next", "Default", "StartAt", "Type", "QueryLanguage", "ErrorEquals", "Resource"}
    | {"CSVHeaders", "Version"}
)
# Fields whose whole value is user data: every string in it, at any depth, may be an expression.
_PAYLOADS = frozenset(
    {"Arguments", "Output", "Assign", "Parameters", "ItemSelector", "BatchInput", "Result"}
)
_NESTED_MACHINES = ("ItemProcessor", "Iterator")


@dataclass(frozen=True)
class Diagnostic:
    """One ValidateStateMachineDefinition diagnostic (AWS's shape)."""

    code: str
    message: str
    location: str | None = None
    severity: str = ERROR

    def as_api(self) -> dict[str, str]:
        shaped = {"severity": self.severity, "code": self.code, "message": self.message}
        if self.location is not None:
            shaped["location"] = self.location
        return shaped

    def as_create_error(self) -> str:
        where = f" at {self.location}" if self.location is not None else ""
        return f"{self.code}: {self.message}{where}"


@dataclass(frozen=True)
class Expression:
    location: str
    text: str


def jsonata_expressions(definition: dict[str, Any]) -> Iterator[Expression]:
    """Every `{% ... %}` of the definition that AWS parses as JSONata, with its location.

    Walks states at any depth (Parallel branches, Map processors), their fields, Catch and
    Choice rules, and payloads at any depth; a state's language is its own QueryLanguage or the
    machine's (JSONPath by default, where `{% %}` is plain text).
    """
    yield from _machine(definition, "", str(definition.get("QueryLanguage", "JSONPath")))


def _machine(machine: Any, location: str, language: str) -> Iterator[Expression]:
    if not isinstance(machine, dict) or not isinstance(machine.get("States"), dict):
        return
    for name, state in machine["States"].items():
        if isinstance(state, dict):
            yield from _state(state, f"{location}/States/{name}", language)


def _state(state: dict[str, Any], location: str, language: str) -> Iterator[Expression]:
    own_language = str(state.get("QueryLanguage", language))
    for key, value in state.items():
        where = f"{location}/{key}"
        if key == "Branches" and isinstance(value, list):
            for index, branch in enumerate(value):
                yield from _machine(branch, f"{where}[{index}]", language)
        elif key in _NESTED_MACHINES:
            yield from _machine(value, where, language)
        elif key not in _NOT_EXPRESSIONS and own_language == "JSONata":
            yield from _value(value, where, structural=key not in _PAYLOADS)


def _value(value: Any, location: str, *, structural: bool) -> Iterator[Expression]:
    if isinstance(value, str):
        found = _EXPRESSION.match(value)
        if found:
            yield Expression(location, found.group("body").strip())
    elif isinstance(value, dict):
        for key, item in value.items():
            if structural and key in _NOT_EXPRESSIONS:
                continue
            yield from _value(
                item, f"{location}/{key}", structural=structural and key not in _PAYLOADS
            )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _value(item, f"{location}[{index}]", structural=structural)


def _schema_diagnostics(text: str) -> list[Diagnostic]:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    try:
        AmazonStateLanguageParser.parse(text)
    except Exception as exc:  # the ASL parser raises ASLParserException and plain errors alike
        message = str(exc).removeprefix("ASLParserException").strip() or type(exc).__name__
        return [Diagnostic(SCHEMA_VALIDATION_FAILED, message)]
    return []


def _jsonata_diagnostics(definition: dict[str, Any]) -> list[Diagnostic]:
    expressions = list(jsonata_expressions(definition))
    errors = parse_errors([expression.text for expression in expressions])
    return [
        Diagnostic(INVALID_JSONATA_EXPRESSION, error.message, expression.location)
        for expression, error in zip(expressions, errors, strict=True)
        if error is not None
    ]


def _check(text: str) -> tuple[Diagnostic, ...]:
    if not text.strip():
        return (Diagnostic(MISSING_DESCRIPTION, "Received a null or empty workflow input."),)
    try:
        definition = json.loads(text)
    except json.JSONDecodeError as exc:
        return (Diagnostic(INVALID_JSON_DESCRIPTION, f"Invalid JSON: {exc}"),)
    if not isinstance(definition, dict):
        return (Diagnostic(SCHEMA_VALIDATION_FAILED, "The definition must be a JSON object."),)
    return (*_schema_diagnostics(text), *_jsonata_diagnostics(definition))


_cache: dict[str, tuple[Diagnostic, ...]] = {}
_cache_lock = threading.Lock()


def validate_definition(text: str) -> tuple[Diagnostic, ...]:
    """AWS's definition-time diagnostics for `text` (empty: valid). Cached by SHA-256."""
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    found = _check(text)
    with _cache_lock:
        _cache[key] = found
    return found


def invalid_definition_message(diagnostics: tuple[Diagnostic, ...]) -> str:
    """The message of AWS's InvalidDefinition error for these diagnostics."""
    joined = ", ".join(d.as_create_error() for d in diagnostics if d.severity == ERROR)
    return f"Invalid State Machine Definition: '{joined}'"


def validation_response(
    text: str, *, severity: str | None = None, max_results: int | None = None
) -> dict[str, Any]:
    """The ValidateStateMachineDefinition response body for `text`."""
    # Only ERROR diagnostics exist here, and severity=ERROR (the default) or WARNING shows them.
    del severity
    diagnostics = validate_definition(text)
    limit = DEFAULT_MAX_RESULTS if not max_results else max(1, int(max_results))
    failed = any(d.severity == ERROR for d in diagnostics)
    return {
        "result": "FAIL" if failed else "OK",
        "diagnostics": [d.as_api() for d in diagnostics[:limit]],
        "truncated": len(diagnostics) > limit,
    }


@functools.cache
def install_definition_validation() -> None:
    """CreateStateMachine / UpdateStateMachine refuse what AWS refuses; ValidateStateMachine-
    Definition answers as AWS does (moto 5.2.5 has no such action). Idempotent."""
    from moto.core.exceptions import AWSError
    from moto.core.responses import ActionResult

    reference_version()  # fail now, with a clear message, if Node or node_modules is missing
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend
    from moto.stepfunctions.responses import StepFunctionResponse

    def refuse_invalid(definition: str) -> None:
        diagnostics = validate_definition(definition or "")
        if any(d.severity == ERROR for d in diagnostics):
            raise AWSError(invalid_definition_message(diagnostics), "InvalidDefinition")

    def validate_state_machine_definition(self: StepFunctionResponse) -> ActionResult:
        return ActionResult(
            validation_response(
                self._get_param("definition") or "",
                severity=self._get_param("severity"),
                max_results=self._get_param("maxResults"),
            )
        )

    # Both create and update call this static method before storing anything.
    StepFunctionsParserBackend._validate_definition = staticmethod(refuse_invalid)  # type: ignore[method-assign]
    StepFunctionResponse.validate_state_machine_definition = validate_state_machine_definition  # type: ignore[attr-defined]
