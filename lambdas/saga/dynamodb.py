"""DynamoDB's low-level format, in one place for every table the saga writes.

- Items: plain JSON-like values (str, int, float, bool, dict, list) to attribute values and
  back. Floats go in as Decimals (boto3 refuses floats) and numbers come back as int when
  integral, else float, so a stored result reads back equal to the one written.
- `read_item`: the consistent read of one item by its key, as plain values.
- Numbers the ledger compares in conditions (`number`): millisecond precision, plain notation.
- Failed requests: a failed condition's code and the old item it returned (ALL_OLD), the
  per-item codes of a cancelled transaction.
- `client_request_token`: the TransactWriteItems token that names exactly one request body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from saga.identity import canonical_json

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    TransactWriteItem = TransactWriteItemTypeDef
else:
    TransactWriteItem = dict

Item = Mapping[str, Any]  # an item in low-level (AttributeValue) format

CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELLED = "TransactionCanceledException"

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


# --- items ---------------------------------------------------------------------------------------
def to_attr(value: Any) -> Any:
    """One plain value as an attribute value."""
    return _SERIALIZER.serialize(_floats_to_decimal(value))


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A plain mapping as an item (or as ExpressionAttributeValues)."""
    return {name: to_attr(value) for name, value in values.items()}


def from_attr(attribute: Any) -> Any:
    return plain(_DESERIALIZER.deserialize(attribute))


def from_item(item: Item) -> dict[str, Any]:
    return {name: from_attr(value) for name, value in item.items()}


def read_item(
    client: DynamoDBClient, table_name: str, key: Mapping[str, str]
) -> dict[str, Any] | None:
    """The item under a key of string attributes, read consistently; None when there is none."""
    response = client.get_item(
        TableName=table_name,
        Key={name: {"S": value} for name, value in key.items()},
        ConsistentRead=True,
    )
    item = response.get("Item")
    return from_item(item) if item else None


def plain(value: Any) -> Any:
    """A deserialized value with its Decimals as int (integral) or float, sets as lists."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | set | frozenset | tuple):
        return [plain(item) for item in value]
    return value


def _floats_to_decimal(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {key: _floats_to_decimal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_floats_to_decimal(item) for item in value]
    return value


def number(value: float) -> dict[str, str]:
    """A number attribute with millisecond precision, in plain (non-exponent) notation."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return {"N": text if text not in ("", "-0") else "0"}


# --- failed requests -----------------------------------------------------------------------------
def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_condition_failure(exc: ClientError) -> bool:
    return error_code(exc) == CONDITION_FAILED


def condition_failed_item(exc: ClientError) -> Item | None:
    """The old item a failed condition returned (ALL_OLD; empty when there was none), or None
    when the request failed for another reason."""
    if not is_condition_failure(exc):
        return None
    item: Item = exc.response.get("Item", {})  # type: ignore[assignment]
    return item


def cancellation_reasons(exc: ClientError) -> list[dict[str, Any]]:
    """Per-item reasons of a cancelled TransactWriteItems, in the order of its items."""
    return cast("list[dict[str, Any]]", exc.response.get("CancellationReasons", []))


def cancellation_codes(exc: ClientError) -> list[str]:
    """Per-item codes of a cancelled TransactWriteItems ("None" for items that were fine)."""
    return [str(reason.get("Code", "None")) for reason in cancellation_reasons(exc)]


# --- transactions --------------------------------------------------------------------------------
def client_request_token(transact_items: list[TransactWriteItem], repeat: int = 0) -> str:
    """TransactWriteItems idempotency token (<= 36 chars) that names exactly one request body.

    DynamoDB applies a token's transaction once and, for 10 minutes, answers the same token with
    the same request as a success without applying it again, and with any other request as
    IdempotentParameterMismatch. So the token is derived from the whole body: the SDK's retry of
    one request (a lost response) is idempotent, and a different body (another delivery, or the
    same delivery deciding again from a record it found) can never reuse it. Between requests,
    the conditions in the transaction decide. `repeat` (> 0) names a deliberate repeat of a body
    DynamoDB cancelled (a transaction conflict: nothing written), which must not meet the first
    request's answer again.
    """
    if repeat:
        transact_items = [*transact_items, cast("TransactWriteItem", {"repeat": repeat})]
    return hashlib.sha256(canonical_json(transact_items).encode()).hexdigest()[:36]
