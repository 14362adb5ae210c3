"""DynamoDB plumbing shared by the sandbox downstreams (not part of their public interface)."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
)

from saga.adapters.errors import DownstreamError, DownstreamNotDispatched, DownstreamTimeout

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()

# Answers after which DynamoDB may or may not have applied the write.
_AMBIGUOUS_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "RequestTimeout"})


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON-like values (str, int, bool, dict, list) -> a low-level attribute map."""
    return {name: _SERIALIZER.serialize(value) for name, value in values.items()}


def to_attr(value: Any) -> Any:
    return _SERIALIZER.serialize(value)


def from_attr(attribute: Any) -> Any:
    return _plain(_DESERIALIZER.deserialize(attribute))


def from_item(item: Any) -> dict[str, Any]:
    return {name: from_attr(value) for name, value in item.items()}


def _plain(value: Any) -> Any:
    """Decimal -> int (the sandbox stores only integers), sets/lists/maps recursively."""
    if isinstance(value, Decimal):
        return int(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | set | frozenset):
        return [_plain(item) for item in value]
    return value


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancellation_codes(exc: ClientError) -> list[str]:
    """Per-item codes of a cancelled TransactWriteItems ("None" for items that were fine)."""
    reasons: Any = exc.response.get("CancellationReasons", [])
    return [str(reason.get("Code", "None")) for reason in reasons]


def classify_failure(exc: Exception, *, downstream: str, action: str) -> DownstreamError:
    """What a failed sandbox write means to the caller: provably nothing, or unknown.

    A ParamValidationError is a bug in the sandbox itself and is not classified (re-raise it).
    """
    if isinstance(exc, ParamValidationError):
        raise exc
    if isinstance(exc, ConnectTimeoutError | EndpointConnectionError):
        # The request never reached the service.
        return DownstreamNotDispatched(f"{action}: not sent ({exc})", downstream=downstream)
    if isinstance(exc, BotoCoreError):
        return DownstreamTimeout(f"{action}: no answer ({exc})", downstream=downstream)
    if isinstance(exc, ClientError) and error_code(exc) in _AMBIGUOUS_CODES:
        return DownstreamTimeout(
            f"{action}: outcome unknown ({error_code(exc)})", downstream=downstream
        )
    # Any other service answer (throttling, cancelled transaction, ...) is a definite "not done".
    return DownstreamNotDispatched(f"{action}: failed ({exc})", downstream=downstream)


def reference_key(kind: str, business_ref: str) -> str:
    return f"ref#{kind}#{business_ref}"


def append_reference_update(
    table_name: str, kind: str, business_ref: str, receipt: dict[str, Any]
) -> TransactWriteItemTypeDef:
    """A TransactWriteItems `Update` adding one receipt to the business-reference index.

    The index item lives in the sandbox control table and is written in the same transaction as
    the effect item, so a consistent read of it is an authoritative answer to "what exists for
    this reference?". A secondary index on the effect tables would be eventually consistent: a
    lookup right after a lost response could miss the item there and re-send the effect.
    """
    return {
        "Update": {
            "TableName": table_name,
            "Key": {"pk": {"S": reference_key(kind, business_ref)}},
            "UpdateExpression": (
                "SET receipts = list_append(if_not_exists(receipts, :empty), :receipt), "
                "business_ref = :ref, kind = :kind"
            ),
            "ExpressionAttributeValues": {
                ":empty": {"L": []},
                ":receipt": {"L": [to_attr(receipt)]},
                ":ref": {"S": business_ref},
                ":kind": {"S": f"{kind}_reference"},
            },
        }
    }


def read_references(
    client: DynamoDBClient, table_name: str, kind: str, business_ref: str
) -> list[dict[str, Any]]:
    response = client.get_item(
        TableName=table_name,
        Key={"pk": {"S": reference_key(kind, business_ref)}},
        ConsistentRead=True,
    )
    item = response.get("Item")
    if item is None:
        return []
    receipts = from_attr(item.get("receipts", {"L": []}))
    return [dict(receipt) for receipt in receipts]
