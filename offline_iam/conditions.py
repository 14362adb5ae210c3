"""IAM condition blocks, evaluated against a request context as AWS documents it.

Sources (IAM User Guide):
- condition operators: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
- multivalued keys, ForAllValues / ForAnyValue:
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
- several operators, keys and values: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-logic-multiple-context-keys-or-values.html

The rules implemented, each from those pages:
- every operator of a block must match, every key of an operator must match (AND); several
  values for one key match if any does (OR);
- a key absent from the request context does not match, except for a negated operator
  (`StringNotEquals`, `ArnNotLike`, ...), which then matches; `...IfExists` matches an absent
  key; `Null` tests presence itself;
- `ForAllValues:` matches when every value of the request's multivalued key matches some policy
  value, and also when the key is absent or empty: "It also returns true if there are no keys
  in the request, or if the key values resolve to a null data set, such as an empty string";
  `ForAnyValue:` when at least one does: "For no matching key or a null dataset, the condition
  returns false" (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_multi-value-conditions.html).
  A key whose only values are empty strings is such a null data set; an empty string among
  other values is not described there, and is refused (UnsupportedPolicy) rather than read;
- `StringLike` / `ArnLike` take `*` (any run of characters) and `?` (one character),
  case-sensitive; `ArnEquals` and `ArnLike` compare the six colon-separated parts separately;
  `Bool` compares `true` / `false`.

Anything else (an operator this module does not know, a policy variable `${...}`) raises
UnsupportedPolicy: a check that cannot evaluate a condition must not guess its answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

# The request context: key -> its value(s). Keys are case-insensitive (AWS documents condition
# key names as case-insensitive); a multivalued key is a list.
ContextValue = str | bool | int | Sequence[str]
Context = Mapping[str, ContextValue]


class UnsupportedPolicy(ValueError):
    """A policy uses something this evaluator does not implement: no answer is guessed."""


@lru_cache(maxsize=4096)
def _wildcard(pattern: str) -> re.Pattern[str]:
    if "${" in pattern:
        raise UnsupportedPolicy(f"policy variables are not supported: {pattern!r}")
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


def wildcard_match(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """`*` and `?` as IAM reads them in actions, resources and `...Like` conditions."""
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    return _wildcard(pattern).fullmatch(value) is not None


def arn_match(pattern: str, arn: str) -> bool:
    """ArnLike / ArnEquals: partition, service, region, account and resource compared part by
    part (the resource keeps its own colons), each with wildcards."""
    expected = pattern.split(":", 5)
    actual = arn.split(":", 5)
    if len(expected) != 6 or len(actual) != 6:
        return pattern == "*"
    return all(wildcard_match(p, a) for p, a in zip(expected, actual, strict=True))


def _as_bool(value: str) -> str:
    return value.strip().lower()


Comparison = Callable[[str, str], bool]  # (policy value, request value) -> match

_COMPARISONS: dict[str, Comparison] = {
    "StringEquals": lambda p, v: p == v,
    "StringEqualsIgnoreCase": lambda p, v: p.lower() == v.lower(),
    "StringLike": wildcard_match,
    "ArnEquals": arn_match,
    "ArnLike": arn_match,
    "Bool": lambda p, v: _as_bool(p) == _as_bool(v),
    "NumericEquals": lambda p, v: float(p) == float(v),
    "NumericLessThan": lambda p, v: float(v) < float(p),
    "NumericLessThanEquals": lambda p, v: float(v) <= float(p),
    "NumericGreaterThan": lambda p, v: float(v) > float(p),
    "NumericGreaterThanEquals": lambda p, v: float(v) >= float(p),
}
# Negated operators: the positive comparison, inverted over the policy's values.
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
    "NumericNotEquals": "NumericEquals",
}


def _request_values(context: Context, key: str) -> list[str] | None:
    """The request's values of `key` as strings (None when the context lacks it)."""
    lowered = {name.lower(): value for name, value in context.items()}
    value = lowered.get(key.lower())
    if value is None:
        return None
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, str | int):
        return [str(value)]
    return [str(item) for item in value]


def _policy_values(value: object) -> list[str]:
    items = value if isinstance(value, list) else [value]
    variables = [item for item in items if isinstance(item, str) and "${" in item]
    if variables:
        raise UnsupportedPolicy(f"policy variables are not supported: {variables[0]!r}")
    return ["true" if v is True else "false" if v is False else str(v) for v in items]


def _split_operator(operator: str) -> tuple[str | None, str, bool]:
    """(set qualifier, base operator, if-exists) of e.g. `ForAllValues:StringEqualsIfExists`."""
    qualifier: str | None = None
    if ":" in operator:
        qualifier, operator = operator.split(":", 1)
        if qualifier not in ("ForAllValues", "ForAnyValue"):
            raise UnsupportedPolicy(f"unknown set operator qualifier {qualifier!r}")
    if_exists = operator.endswith("IfExists") and operator != "IfExists"
    return qualifier, operator.removesuffix("IfExists") if if_exists else operator, if_exists


def _unless_null(key: str, present: list[str] | None) -> list[str] | None:
    """A multivalued key's values, None when they resolve to a null data set ("such as an
    empty string"): no values, or only empty ones."""
    if not present or not any(present):
        return None
    if "" in present:
        raise UnsupportedPolicy(
            f"{key} has an empty value among others: IAM does not document how a set operator "
            "reads it"
        )
    return present


def _key_matches(operator: str, key: str, policy_value: object, context: Context) -> bool:
    qualifier, base, if_exists = _split_operator(operator)
    wanted = _policy_values(policy_value)
    present = _request_values(context, key)
    if base == "Null":
        if qualifier is not None or if_exists:
            raise UnsupportedPolicy(f"{operator} is not a valid operator")
        is_absent = present is None or present == []
        return any(_as_bool(w) == ("true" if is_absent else "false") for w in wanted)
    negated = base in _NEGATED
    compare = _COMPARISONS.get(_NEGATED.get(base, base))
    if compare is None:
        raise UnsupportedPolicy(f"condition operator {operator!r} is not supported")

    def one(value: str) -> bool:
        hit = any(compare(w, value) for w in wanted)
        return not hit if negated else hit

    if qualifier is not None:
        present = _unless_null(key, present)
    if qualifier == "ForAllValues":
        return present is None or all(one(value) for value in present)
    if qualifier == "ForAnyValue":
        return present is not None and any(one(value) for value in present)
    if present is None:
        return if_exists or negated
    if len(present) != 1:
        raise UnsupportedPolicy(
            f"{key} has several values in the request: use ForAllValues or ForAnyValue"
        )
    return one(present[0])


def conditions_match(block: Mapping[str, Mapping[str, object]] | None, context: Context) -> bool:
    """Whether a statement's Condition block matches the request context (no block: yes)."""
    if not block:
        return True
    return all(
        _key_matches(operator, key, value, context)
        for operator, keys in block.items()
        for key, value in keys.items()
    )
