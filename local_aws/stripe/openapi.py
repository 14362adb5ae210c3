"""Stripe's API description (openapi/subset.json) as the local Stripe server's judge.

Every request the server receives is decoded and validated against its operation before it is
acted on, and every response is validated before it is sent (local_aws.stripe.server).
Stripe's v1 bodies and query strings are form-encoded deep objects (`metadata[case_id]=c-1`,
`expand[0]=latest_charge`): `decode_form` turns them into nested objects, `coerce` gives each
leaf the type its schema names (a form value is always text), then jsonschema validates. The
description is OpenAPI 3.0, whose `nullable` JSON Schema does not know: it becomes an explicit
`null` alternative when the description is loaded.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl

from jsonschema import Draft4Validator
from referencing import Registry
from referencing.jsonschema import DRAFT4

SUBSET_PATH: Final = Path(__file__).parent / "openapi" / "subset.json"
_BASE: Final = "urn:stripe-openapi-subset"
_KEY_PART: Final = re.compile(r"\[([^\[\]]*)\]")
_INTEGER: Final = re.compile(r"-?\d+")
_NUMBER: Final = re.compile(r"-?\d+(\.\d+)?")


class MalformedRequest(ValueError):
    """The request does not match the operation's description (Stripe answers it 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class MalformedResponse(AssertionError):
    """The local server was about to answer what Stripe's description does not allow: a bug of
    the server, never sent."""


# --- form-encoded deep objects ------------------------------------------------------------------
def decode_form(text: str) -> dict[str, Any]:
    """`a[b][0]=x&c=y` -> {"a": {"b": {"0": "x"}}, "c": "y"}: nested objects of text; a
    repeated key or a key both a value and an object is malformed."""
    decoded: dict[str, Any] = {}
    for raw_key, value in parse_qsl(text, keep_blank_values=True, strict_parsing=False):
        head, _, rest = raw_key.partition("[")
        parts = [head, *_KEY_PART.findall("[" + rest)] if rest else [head]
        if not head or (rest and "[" + rest != "".join(f"[{p}]" for p in parts[1:])):
            raise MalformedRequest(f"Invalid parameter name: {raw_key}", raw_key)
        node = decoded
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise MalformedRequest(f"Invalid hash: {raw_key}", raw_key)
            node = child
        leaf = parts[-1]
        if leaf in node:
            raise MalformedRequest(f"Received a parameter twice: {raw_key}", raw_key)
        node[leaf] = value
    return decoded


def coerce(value: Any, schema: Mapping[str, Any], resolve: Any) -> Any:
    """`value` (decoded text) with the types its schema names: integers, numbers, booleans,
    arrays (an object of indexes `0`, `1`, ... in order). What cannot be given a type is left
    as text, for the validator to refuse with its own message."""
    schema = resolve(schema)
    alternatives = [resolve(s) for s in schema.get("anyOf") or schema.get("oneOf") or [schema]]
    if isinstance(value, dict):
        return _coerce_object(value, alternatives, resolve)
    if not isinstance(value, str) or any(_accepts_text(a, value) for a in alternatives):
        return value
    for alternative in alternatives:
        typed = _typed_text(value, alternative.get("type"))
        if typed is not None:
            return typed
    return value


def _coerce_object(value: dict[str, Any], alternatives: list[Any], resolve: Any) -> Any:
    """An object of text: a list (an array's indexes) or an object, as an alternative says."""
    for alternative in alternatives:
        if alternative.get("type") == "array" and _is_index_object(value):
            items = alternative.get("items", {})
            return [coerce(value[k], items, resolve) for k in sorted(value, key=int)]
    for alternative in alternatives:
        if alternative.get("type", "object") == "object" and "enum" not in alternative:
            properties = alternative.get("properties", {})
            extra = alternative.get("additionalProperties")
            other = extra if isinstance(extra, Mapping) else {}
            return {
                key: coerce(item, properties.get(key, other), resolve)
                for key, item in value.items()
            }
    return value


def _typed_text(value: str, kind: Any) -> int | float | bool | None:
    if kind == "integer" and _INTEGER.fullmatch(value):
        return int(value)
    if kind == "number" and _NUMBER.fullmatch(value):
        return float(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return None


def _accepts_text(schema: Mapping[str, Any], value: str) -> bool:
    if "enum" in schema:
        return value in schema["enum"]
    return schema.get("type") == "string"


def _is_index_object(value: Mapping[str, Any]) -> bool:
    return sorted(value, key=lambda k: (len(k), k)) == [str(i) for i in range(len(value))]


# --- the description -----------------------------------------------------------------------------
def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's schema objects as JSON Schema: `nullable` as a null alternative, `$ref`s
    to this document's base."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {
        key: (
            f"{_BASE}{value}" if key == "$ref" and isinstance(value, str) else _json_schema(value)
        )
        for key, value in node.items()
        if key != "nullable"
    }
    if node.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


@dataclass(frozen=True)
class Operation:
    """One served operation: how its requests and responses must look."""

    method: str
    path: str
    description: Mapping[str, Any]
    _api: StripeDescription

    def match(self, path: str) -> dict[str, str] | None:
        """The path parameters when `path` is this operation's, else None."""
        template = self.path.split("/")
        parts = path.split("/")
        if len(parts) != len(template):
            return None
        found: dict[str, str] = {}
        for expected, part in zip(template, parts, strict=True):
            if expected.startswith("{"):
                if not part:
                    return None
                found[expected[1:-1]] = part
            elif expected != part:
                return None
        return found

    def _parameters(self, where: str) -> list[Mapping[str, Any]]:
        return [p for p in self.description.get("parameters", []) if p["in"] == where]

    def request(self, path_parameters: Mapping[str, str], query: str, body: str) -> dict[str, Any]:
        """The request's parameters, decoded and typed; MalformedRequest names what Stripe's
        description refuses (an unknown parameter, a wrong type, a missing one)."""
        for parameter in self._parameters("path"):
            self._api.check(
                path_parameters.get(parameter["name"]), parameter["schema"], parameter["name"]
            )
        decoded_query = decode_form(query)
        decoded_body = decode_form(body)
        form = self.description.get("requestBody", {}).get("content", {})
        body_schema = form.get("application/x-www-form-urlencoded", {}).get("schema")
        if body_schema is None:
            if decoded_body:
                raise MalformedRequest(f"{self.method.upper()} {self.path} takes no body")
            schema = {
                "type": "object",
                "properties": {p["name"]: p["schema"] for p in self._parameters("query")},
                "required": [p["name"] for p in self._parameters("query") if p.get("required")],
                "additionalProperties": False,
            }
            params = decoded_query
        else:
            if decoded_query:
                raise MalformedRequest(
                    f"{self.method.upper()} {self.path} takes its parameters in the body"
                )
            schema, params = body_schema, decoded_body
        typed: dict[str, Any] = coerce(params, schema, self._api.resolve)
        self._api.check(typed, schema, None)
        return typed

    def check_response(self, status: int, body: Any) -> None:
        """Raise MalformedResponse when `body` is not what the description allows for
        `status` (the status's own response, else `default`)."""
        responses = self.description["responses"]
        response = responses.get(str(status)) or responses.get("default")
        if response is None:
            raise MalformedResponse(f"{self.method.upper()} {self.path}: no {status} response")
        schema = response["content"]["application/json"]["schema"]
        problems = self._api.problems(body, schema)
        if problems:
            raise MalformedResponse(
                f"{self.method.upper()} {self.path} {status}: " + "; ".join(problems[:5])
            )


class StripeDescription:
    """The vendored description: its API version and its operations."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.api_version = str(document["info"]["version"])
        self._schemas = document["components"]["schemas"]
        self._validators: dict[str, Draft4Validator] = {}
        converted = {"components": {"schemas": _json_schema(self._schemas)}}
        self._registry: Registry = Registry().with_resource(
            _BASE, DRAFT4.create_resource(converted)
        )
        self.operations = tuple(
            Operation(method, path, operation, self)
            for path, methods in document["paths"].items()
            for method, operation in methods.items()
        )

    @classmethod
    def load(cls, path: Path = SUBSET_PATH) -> StripeDescription:
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def operation(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation serving `method path`, with its path parameters (None: not served)."""
        for operation in self.operations:
            if operation.method == method.lower():
                found = operation.match(path)
                if found is not None:
                    return operation, found
        return None

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """A schema with its `$ref` followed (the description's own form, for `coerce`)."""
        while "$ref" in schema:
            schema = self._schemas[str(schema["$ref"]).rsplit("/", 1)[-1]]
        return schema

    def _validator(self, schema: Mapping[str, Any]) -> Draft4Validator:
        """One compiled validator per schema, kept (the server validates every request)."""
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            validator = Draft4Validator(_json_schema(schema), registry=self._registry)
            self._validators[key] = validator
        return validator

    def problems(self, value: Any, schema: Mapping[str, Any]) -> list[str]:
        return [_describe(error) for error in _errors(self._validator(schema), value)]

    def check(self, value: Any, schema: Mapping[str, Any], param: str | None) -> None:
        for error in _errors(self._validator(schema), value):
            name = param or ".".join(str(p) for p in error.absolute_path) or None
            if error.validator == "additionalProperties" and not error.absolute_path:
                unknown = sorted(set(value) - set(error.schema.get("properties", {})))
                raise MalformedRequest(f"Received unknown parameter: {unknown[0]}", unknown[0])
            if error.validator == "required":
                missing = str(error.message).split("'")[1]
                raise MalformedRequest(f"Missing required param: {missing}.", missing)
            raise MalformedRequest(f"Invalid {name or 'request'}: {error.message}", name)


def _errors(validator: Draft4Validator, value: Any) -> Iterator[Any]:
    return iter(sorted(validator.iter_errors(copy.deepcopy(value)), key=lambda e: e.path))


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(body)"
    return f"{where}: {error.message[:200]}"
