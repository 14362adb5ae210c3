"""DynamoDB's request-dependent condition keys: `dynamodb:Attributes`, `dynamodb:ReturnValues`
and `dynamodb:Select`, from a request's parameters.

Source: the DynamoDB Developer Guide, "Using IAM policy conditions for fine-grained access
control" (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html):
- `dynamodb:Attributes` lists the attribute names a request reads, writes or evaluates ("These
  attributes can be read, written, or evaluated in a conditional write or scan filter"; with it
  "you must specify the names of all of the primary key and index key attributes"), so here:
  the key's attributes, a PutItem's item, and every top-level name of the request's update,
  condition, key-condition, filter and projection expressions;
- `dynamodb:ReturnValues` "always has a value (NONE unless otherwise specified)" on a write;
- `dynamodb:Select` is a Query's or Scan's `Select`, defaulting as the API reference says
  (ALL_ATTRIBUTES on a table, ALL_PROJECTED_ATTRIBUTES on an index, SPECIFIC_ATTRIBUTES with a
  projection).

A read without a projection returns every attribute, which the guide does not spell out as a
value of `dynamodb:Attributes`: it is `*` here, which only a policy allowing every attribute
matches, so the offline check may deny what AWS would allow but never the reverse. So is a
write that asks for the old item when its condition fails (`ReturnValuesOnConditionCheckFailure:
ALL_OLD`): none of the guide's condition keys (LeadingKeys, Select, Attributes, ReturnValues:
"Represents the ReturnValues parameter of a request", ReturnConsumedCapacity) represents that
parameter, so no policy can confine what it reads; it is counted as reading every attribute,
which a policy that lists attributes refuses. Legacy
parameters (AttributeUpdates, Expected, AttributesToGet, ...) are refused (the saga uses
expressions only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

EVERY_ATTRIBUTE = "*"
_LEGACY = (
    "AttributeUpdates",
    "Expected",
    "AttributesToGet",
    "KeyConditions",
    "QueryFilter",
    "ScanFilter",
)
_EXPRESSIONS = (
    "UpdateExpression",
    "ConditionExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)
_WRITES = ("PutItem", "UpdateItem", "DeleteItem")
_READS_ALL_WITHOUT_PROJECTION = ("GetItem", "Query", "Scan")
# The words of the expression grammar that are not attribute names (case-insensitive).
_KEYWORDS = frozenset({"and", "or", "not", "between", "in", "set", "remove", "add", "delete"})
_TOKEN = re.compile(r"\s*(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|\[\s*\d+\s*\]|.)")


class UnmappedExpression(ValueError):
    """A request whose attributes cannot be told (a legacy parameter, an unknown placeholder)."""


def top_level_names(expression: str, names: Mapping[str, str]) -> set[str]:
    """The top-level attribute names an expression refers to: the first element of each
    document path (`#n` resolved with ExpressionAttributeNames), never a function's name, a
    keyword or a value placeholder."""
    tokens = [t for t in _TOKEN.findall(expression) if t.strip()]
    found: set[str] = set()
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else ""
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if previous == "." or token.startswith(":"):
            continue  # a nested element, or a value
        if token.startswith("#"):
            if token not in names:
                raise UnmappedExpression(f"placeholder {token} has no ExpressionAttributeNames")
            found.add(names[token])
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
            if following == "(" or token.lower() in _KEYWORDS:
                continue  # a function (attribute_not_exists, if_not_exists, ...) or a keyword
            found.add(token)
    return found


def request_context(operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The request-dependent DynamoDB condition keys of one item-level request (an operation
    of its own or an item of a transaction)."""
    legacy = [name for name in _LEGACY if name in params]
    if legacy:
        raise UnmappedExpression(f"dynamodb:{operation} with legacy parameter {legacy[0]}")
    names = params.get("ExpressionAttributeNames") or {}
    attributes: set[str] = set()
    for carrier in ("Key", "Item"):
        attributes |= set(params.get(carrier) or {})
    for expression in _EXPRESSIONS:
        if params.get(expression):
            attributes |= top_level_names(str(params[expression]), names)
    projected = bool(params.get("ProjectionExpression"))
    if operation in _READS_ALL_WITHOUT_PROJECTION and not projected:
        attributes.add(EVERY_ATTRIBUTE)
    if params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
        attributes.add(EVERY_ATTRIBUTE)  # the whole item back, ungoverned (docstring)
    context: dict[str, Any] = {"dynamodb:Attributes": sorted(attributes)}
    if operation in _WRITES:
        context["dynamodb:ReturnValues"] = str(params.get("ReturnValues") or "NONE")
    if operation in ("Query", "Scan"):
        default = "ALL_PROJECTED_ATTRIBUTES" if params.get("IndexName") else "ALL_ATTRIBUTES"
        chosen = params.get("Select") or ("SPECIFIC_ATTRIBUTES" if projected else default)
        context["dynamodb:Select"] = str(chosen)
    return context
