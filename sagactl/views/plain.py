"""Plain data from what AWS answers: JSON-able values, DynamoDB items, JSON text fields."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from saga.dynamodb import from_item

__all__ = ["execution_input", "from_item", "parse_json", "plain"]


def plain(value: Any) -> Any:
    """JSON-able: Decimals to int/float, datetimes to ISO strings, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    return value


def parse_json(text: str | None) -> Any:
    """The JSON in a text field of an answer (an execution's input or output, an event's
    details); None when there is none or it is not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def execution_input(description: dict[str, Any]) -> dict[str, Any]:
    """An execution's input as an object ({} when it is not one): the case it runs."""
    parsed = parse_json(description.get("input"))
    return parsed if isinstance(parsed, dict) else {}
