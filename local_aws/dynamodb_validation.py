"""DynamoDB's request validation for the operations the saga and sagactl use, which moto leaves
out (docs/design.md §7).

DynamoDB answers ValidationException (HTTP 400), and does nothing, for a request that:

- breaks a constraint of the API model that the SDK does not check itself: a value outside an
  enum (`ReturnValuesOnConditionCheckFailure`, `ReturnValues`, `Select`...), a string or list
  longer than its maximum, an index name outside its pattern;
- gives `ExpressionAttributeValues` or `ExpressionAttributeNames` that are empty, that no
  expression of the request could use ("can only be specified when using expressions"), with a
  placeholder no expression of the request uses ("Value provided in ExpressionAttributeValues
  unused in expressions"), or lacks a placeholder an expression uses ("An expression attribute
  value used in expression is not defined") (developer guide, "Expression attribute names" and
  "Expression attribute values"; moto checks the unused values of UpdateItem only);
- mixes an expression with the legacy parameter it replaces (`Expected` and
  `ConditionExpression`, `AttributesToGet` and `ProjectionExpression`...);
- names a key that is not exactly the table's key (its attributes, with their types), or an
  item without the table's key attributes;
- for PutItem and DeleteItem, asks `ReturnValues` other than NONE or ALL_OLD;
- for a Query, names no key condition or an index the table does not have;
- for TransactWriteItems, holds an item that is not exactly one of ConditionCheck, Put,
  Delete, Update; each item is checked like the single-item request it stands for.

Installed on moto's DynamoHandler for PutItem, UpdateItem, DeleteItem, GetItem, Query, Scan and
TransactWriteItems (the calls tests/e2e/test_grants_match_calls.py records), outside the
ClientRequestToken contract: a request refused here binds no token, as on AWS.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from local_aws.patching import wrap_once

_MARK = "_saga_validates_requests"
VALIDATED_OPERATIONS = (
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "GetItem",
    "Query",
    "Scan",
    "TransactWriteItems",
)
# The expressions each request (or transaction item) may carry; which of them take values.
_EXPRESSIONS: Mapping[str, tuple[str, ...]] = {
    "PutItem": ("ConditionExpression",),
    "DeleteItem": ("ConditionExpression",),
    "UpdateItem": ("UpdateExpression", "ConditionExpression"),
    "GetItem": ("ProjectionExpression",),
    "Query": ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"),
    "Scan": ("FilterExpression", "ProjectionExpression"),
    "ConditionCheck": ("ConditionExpression",),
    "Put": ("ConditionExpression",),
    "Delete": ("ConditionExpression",),
    "Update": ("UpdateExpression", "ConditionExpression"),
}
_NO_VALUES = frozenset({"ProjectionExpression"})
# Legacy parameter -> the expression parameters that replace it.
_LEGACY: Mapping[str, tuple[str, ...]] = {
    "Expected": ("ConditionExpression",),
    "AttributesToGet": ("ProjectionExpression",),
    "AttributeUpdates": ("UpdateExpression",),
    "KeyConditions": ("KeyConditionExpression",),
    "QueryFilter": ("FilterExpression",),
    "ScanFilter": ("FilterExpression",),
    "ConditionalOperator": (
        "ConditionExpression",
        "FilterExpression",
        "KeyConditionExpression",
        "UpdateExpression",
    ),
}
_RETURN_VALUES_OF_WRITES = frozenset({"NONE", "ALL_OLD"})
_TRANSACT_ACTIONS = ("ConditionCheck", "Put", "Delete", "Update")
_PLACEHOLDER = {"Names": re.compile(r"#[A-Za-z0-9_]+"), "Values": re.compile(r":[A-Za-z0-9_]+")}


class _Refused(Exception):
    """A ValidationException's message, raised inside the checks."""


def _refuse(message: str) -> _Refused:
    return _Refused(message)


# --- the API model's constraints -----------------------------------------------------------------
@functools.cache
def _input_shape(operation: str) -> Any:
    import botocore.session

    model = botocore.session.get_session().get_service_model("dynamodb")
    return model.operation_model(operation).input_shape


def model_violations(shape: Any, value: Any, path: str = "") -> list[str]:
    """What breaks the model's enum, max and pattern constraints (the SDK checks only minimums),
    each in DynamoDB's words, members named as it names them (`transactItems.1.member.put...`)."""
    metadata = shape.metadata
    if shape.type_name == "structure" and isinstance(value, Mapping):
        found: list[str] = []
        for name, member in shape.members.items():
            if name in value:
                where = f"{path}.{name[0].lower()}{name[1:]}".lstrip(".")
                found += model_violations(member, value[name], where)
        return found
    if shape.type_name == "list" and isinstance(value, list):
        found = []
        if "max" in metadata and len(value) > metadata["max"]:
            found.append(
                f"Value at '{path}' failed to satisfy constraint: Member must have length less "
                f"than or equal to {metadata['max']}"
            )
        for index, item in enumerate(value, 1):
            found += model_violations(shape.member, item, f"{path}.{index}.member")
        return found
    if shape.type_name == "string" and isinstance(value, str):
        return _string_violations(metadata, value, path)
    return []


def _string_violations(metadata: Mapping[str, Any], value: str, path: str) -> list[str]:
    at = f"Value '{value}' at '{path}' failed to satisfy constraint: Member must"
    if "enum" in metadata and value not in metadata["enum"]:
        return [f"{at} satisfy enum value set: [{', '.join(metadata['enum'])}]"]
    if "max" in metadata and len(value) > metadata["max"]:
        return [f"{at} have length less than or equal to {metadata['max']}"]
    pattern = metadata.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        return [f"{at} satisfy regular expression pattern: {pattern}"]
    return []


def _check_model(operation: str, body: Mapping[str, Any]) -> None:
    found = model_violations(_input_shape(operation), body)
    if found:
        plural = "error" if len(found) == 1 else "errors"
        raise _refuse(f"{len(found)} validation {plural} detected: {'; '.join(found)}")


# --- expressions ---------------------------------------------------------------------------------
def _check_expressions(kind: str, request: Mapping[str, Any]) -> None:
    """Legacy and expression parameters apart; every placeholder given is used, every one used
    is given (`kind`: the operation, or the transaction item's action)."""
    expressions = {name: request[name] for name in _EXPRESSIONS[kind] if request.get(name)}
    for legacy, replacements in _LEGACY.items():
        both = [name for name in replacements if name in expressions]
        if legacy in request and both:
            raise _refuse(
                "Can not use both expression and non-expression parameters in the same request: "
                f"Non-expression parameters: {{{legacy}}} Expression parameters: "
                f"{{{', '.join(both)}}}"
            )
    for what in ("Names", "Values"):
        _check_placeholders(kind, what, request.get(f"ExpressionAttribute{what}"), expressions)


def _check_placeholders(
    kind: str, what: str, given: Mapping[str, Any] | None, expressions: Mapping[str, str]
) -> None:
    parameter = f"ExpressionAttribute{what}"
    usable = [n for n in _EXPRESSIONS[kind] if what == "Names" or n not in _NO_VALUES]
    if given is not None and not given:
        raise _refuse(f"{parameter} must not be empty")
    if given and not any(name in expressions for name in usable):
        verb = "is" if len(usable) == 1 else "are"
        raise _refuse(
            f"{parameter} can only be specified when using expressions: "
            f"{' and '.join(usable)} {verb} null"
        )
    used: set[str] = set()
    for name, expression in expressions.items():
        placeholders = _PLACEHOLDER[what].findall(expression)
        used.update(placeholders)
        for placeholder in placeholders:
            if placeholder not in (given or {}):
                raise _refuse(_undefined(name, what, placeholder))
    unused = sorted(set(given or {}) - used)
    if unused:
        raise _refuse(
            f"Value provided in {parameter} unused in expressions: keys: {{{', '.join(unused)}}}"
        )


def _undefined(expression: str, what: str, placeholder: str) -> str:
    if what == "Values":
        detail = "An expression attribute value used in expression is not defined; attribute value"
    else:
        detail = (
            "An expression attribute name used in the document path is not defined; attribute name"
        )
    return f"Invalid {expression}: {detail}: {placeholder}"


# --- keys ---------------------------------------------------------------------------------------
def _key_schema(backend: Any, table_name: str) -> dict[str, str]:
    table = backend.get_table(table_name)  # ResourceNotFoundException, as DynamoDB answers
    schema = {table.hash_key_attr: table.hash_key_type}
    if table.range_key_attr:
        schema[table.range_key_attr] = table.range_key_type
    return schema


def _type_of(value: Any) -> str:
    return next(iter(value)) if isinstance(value, Mapping) and len(value) == 1 else "?"


def _check_key(backend: Any, table_name: str, key: Mapping[str, Any]) -> None:
    schema = _key_schema(backend, table_name)
    if set(key) != set(schema) or any(_type_of(key[n]) != t for n, t in schema.items()):
        raise _refuse("The provided key element does not match the schema")


def _check_item_keys(backend: Any, table_name: str, item: Mapping[str, Any]) -> None:
    for name, expected in _key_schema(backend, table_name).items():
        if name not in item:
            raise _refuse(
                f"One or more parameter values were invalid: Missing the key {name} in the item"
            )
        if _type_of(item[name]) != expected:
            raise _refuse(
                "One or more parameter values were invalid: Type mismatch for key "
                f"{name} expected: {expected} actual: {_type_of(item[name])}"
            )


# --- per operation ------------------------------------------------------------------------------
def _check_single(kind: str, request: Mapping[str, Any], backend: Any) -> None:
    """One item's request: PutItem/Put, UpdateItem/Update, DeleteItem/Delete, ConditionCheck,
    GetItem."""
    _check_expressions(kind, request)
    returns = request.get("ReturnValues", "NONE")
    if kind in ("PutItem", "DeleteItem") and returns not in _RETURN_VALUES_OF_WRITES:
        raise _refuse("Return values set to invalid value")
    if "Item" in request:
        _check_item_keys(backend, request["TableName"], request["Item"])
    else:
        _check_key(backend, request["TableName"], request.get("Key", {}))


def _check_read(kind: str, request: Mapping[str, Any], backend: Any) -> None:
    """Query and Scan."""
    _check_expressions(kind, request)
    if kind == "Query" and not (
        request.get("KeyConditionExpression") or "KeyConditions" in request
    ):
        raise _refuse(
            "Either the KeyConditions or KeyConditionExpression parameter must be specified in "
            "the request."
        )
    index = request.get("IndexName")
    if index:
        table = backend.get_table(request["TableName"])
        names = {i.name for i in [*table.global_indexes, *table.indexes]}
        if index not in names:
            raise _refuse(f"The table does not have the specified index: {index}")


def _check_transaction(request: Mapping[str, Any], backend: Any) -> None:
    for item in request.get("TransactItems", []):
        actions = [action for action in _TRANSACT_ACTIONS if action in item]
        if len(actions) != 1 or len(item) != 1:
            raise _refuse("TransactItems can only contain one of Check, Put, Update or Delete")
        _check_single(actions[0], item[actions[0]], backend)


def check_request(operation: str, request: Mapping[str, Any], backend: Any) -> None:
    """Raise moto's ValidationException if DynamoDB would refuse this request."""
    from moto.dynamodb.exceptions import MockValidationException

    try:
        _check_model(operation, request)
        if operation == "TransactWriteItems":
            _check_transaction(request, backend)
        elif operation in ("Query", "Scan"):
            _check_read(operation, request, backend)
        else:
            _check_single(operation, request, backend)
    except _Refused as refused:
        raise MockValidationException(str(refused)) from None


def install_dynamodb_validation() -> None:
    """Validate the requests of VALIDATED_OPERATIONS before moto runs them (idempotent).
    Installed after the ClientRequestToken contract, so that it runs first."""
    from moto.dynamodb.responses import DynamoHandler

    for operation in VALIDATED_OPERATIONS:
        method = re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()
        wrap_once(DynamoHandler, method, _MARK, _validating(operation))


def _validating(operation: str) -> Callable[[Any], Any]:
    def wrap(original: Any) -> Any:
        def validated(self: Any) -> Any:
            check_request(operation, self.body, self.dynamodb_backend)
            return original(self)

        return validated

    return wrap


__all__ = ["VALIDATED_OPERATIONS", "check_request", "install_dynamodb_validation"]
