"""The sandbox's reference index: what exists for one business reference (design.md §3.5).

The index item lives in the sandbox control table (`ref#<kind>#<reference>`) and is written in
the same transaction as each effect item, so a consistent read of it is an authoritative answer
to "what exists for this reference?". A secondary index on the effect tables would be eventually
consistent: a lookup right after a lost response could miss the item there and re-send the
effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga.dynamodb import from_attr, to_attr
from saga.sandbox.calls import classify_failure, draw_lookup_fault
from saga.sandbox.faults import FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


def reference_key(kind: str, business_ref: str) -> str:
    return f"ref#{kind}#{business_ref}"


def append_reference_update(
    table_name: str, kind: str, business_ref: str, receipt: dict[str, Any]
) -> TransactWriteItemTypeDef:
    """A TransactWriteItems `Update` adding one receipt to the business-reference index."""
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
    """Every receipt recorded for the reference, oldest first (a consistent read)."""
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


def find_by_reference(
    client: DynamoDBClient,
    sandbox_table: str,
    kind: str,
    business_ref: str,
    *,
    faults: FaultInjector,
    action: str,
) -> list[dict[str, Any]]:
    """A lookup by business reference: consumes this call's fault, then reads the index."""
    draw_lookup_fault(faults, action=action)
    try:
        return read_references(client, sandbox_table, kind, business_ref)
    except (BotoCoreError, ClientError) as exc:
        raise classify_failure(exc, downstream=faults.downstream, action=action) from exc
