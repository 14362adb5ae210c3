"""Reading cdk context: the section base model and the value checks, each with its message.

Every message names its key the way the configuration always has ("context
'ledger.attempt_budget' must be a positive integer, got 0"): a check raises `invalid(...)`
with the words after the key, pydantic knows the key (the field's location, aliases included),
and `describe` joins the two. A check across keys raises `refused(...)` with a whole sentence
that names its keys itself. A missing required key reaches its own check as None, so it reads
"got None", as a wrong value would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from saga.formats import currency_problem

# pydantic error types of these checks: the words after "context '<key>' ", or a whole message.
_AT_KEY = "context_value"
_WHOLE = "context_message"


class ConfigError(ValueError):
    """A cdk context value is missing or invalid; the message names the key."""


def invalid(message: str) -> PydanticCustomError:
    """A wrong value; the message follows "context '<its key>' "."""
    return PydanticCustomError(_AT_KEY, message)


def refused(message: str) -> PydanticCustomError:
    """A check across keys: the message names them itself."""
    return PydanticCustomError(_WHOLE, message)


def describe(exc: ValidationError) -> str:
    """One line per error, each naming its key (`retry.tool.MaxAttempts`)."""
    lines = []
    for error in exc.errors(include_url=False):
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == _WHOLE or not key:
            lines.append(str(error["msg"]))
        elif error["type"] == _AT_KEY:
            lines.append(f"context '{key}' {error['msg']}")
        else:  # pydantic's own wording, still at its key
            lines.append(f"context '{key}': {error['msg']}")
    return "\n".join(lines)


def from_json(value: Any) -> Any:
    """`-c section={...}` from the CDK CLI arrives as a string: read it as JSON (a string that
    is not JSON is returned as is, for the caller's own error)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def positive_int(maximum: int | None = None) -> BeforeValidator:
    """A positive integer (`-c key=30` arrives as the string "30"), at most `maximum`."""

    def check(value: Any) -> int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise invalid(f"must be a positive integer, got {value!r}")
        if maximum is not None and value > maximum:
            raise invalid(f"must be <= {maximum}, got {value}")
        return value

    return BeforeValidator(check)


def minor_units_by_tenant(section: str) -> Callable[[Any], dict[str, dict[str, int]]]:
    """The parser of a section of amounts (approval_thresholds, refund_ceilings): an object of
    tenants, each a non-empty object of currencies, each a positive integer of minor units (`-c`
    gives the whole section as JSON)."""

    def parse(value: Any) -> dict[str, dict[str, int]]:
        value = from_json(value)
        if not isinstance(value, Mapping):
            raise invalid(f"must be an object {{tenant: {{CURRENCY: minor units}}}}, got {value!r}")
        amounts: dict[str, dict[str, int]] = {}
        for tenant, limits in value.items():
            where = f"context '{section}.{tenant}'"
            if not isinstance(limits, Mapping) or not limits:
                raise refused(f"{where} must be a non-empty object {{CURRENCY: minor units}}")
            amounts[tenant] = {}
            for currency, limit in limits.items():
                problem = currency_problem(currency)
                if problem is not None:
                    raise refused(f"{where}: {currency!r} {problem}")
                if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                    raise refused(
                        f"context '{section}.{tenant}.{currency}' must be a positive integer "
                        f"of minor units, got {limit!r}"
                    )
                amounts[tenant][currency] = limit
        return amounts

    return parse


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise invalid(f"must be true or false, got {value!r}")


def string_list(value: Any) -> tuple[str, ...]:
    """A list of non-empty strings; one string, or a JSON list in a string, is read as one."""
    if isinstance(value, str):
        value = json.loads(value) if value.startswith("[") else [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise invalid(f"must be a list of non-empty strings, got {value!r}")
    return tuple(value)


class ContextSection(BaseModel):
    """A context object, from cdk.json or as JSON on the command line. Unknown keys are
    refused (a misspelt key would otherwise be ignored while its default... there is none: its
    check reports it missing); every required key goes through its own check."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )
    _unknown_hint: ClassVar[str] = ""
    _strict_keys: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        value = from_json(value)
        if isinstance(value, BaseModel):
            return value
        if not isinstance(value, Mapping):
            raise invalid(f"must be an object, got {value!r}")
        aliases = {name: field.alias or name for name, field in cls.model_fields.items()}
        if cls._strict_keys:
            unknown = set(value) - set(aliases) - set(aliases.values())
            if unknown:
                allowed = sorted(a for a in aliases.values() if a != "name")
                raise invalid(
                    f"has unknown fields {sorted(unknown)}; allowed: {allowed}{cls._unknown_hint}"
                )
        filled = dict(value)
        for name, field in cls.model_fields.items():
            if field.is_required() and name not in filled and aliases[name] not in filled:
                filled[aliases[name]] = None  # its own check says it is missing
        return filled
