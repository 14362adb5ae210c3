"""The sandbox inventory: one item per SKU (`sku`, integer `available`), seeded per SKU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The examples use these: plenty, a little, and none (for OutOfStock).
DEFAULT_STOCK: Final[Mapping[str, int]] = {"SKU-RED-MUG": 100, "SKU-BLUE-MUG": 5, "SKU-EMPTY": 0}


def seed_inventory(client: DynamoDBClient, table_name: str, stock: Mapping[str, int]) -> None:
    """Set each SKU's `available` to the given level (a plain put: seeding twice is harmless).

    The whole mapping is checked before anything is written, so bad input changes nothing.
    """
    for sku, available in stock.items():
        if not isinstance(sku, str) or not sku:
            raise ValueError(f"inventory seed: SKU must be a non-empty string, got {sku!r}")
        if isinstance(available, bool) or not isinstance(available, int) or available < 0:
            raise ValueError(
                f"inventory seed: {sku}: available must be a non-negative integer, "
                f"got {available!r}"
            )
    for sku, available in stock.items():
        client.put_item(
            TableName=table_name,
            Item={"sku": {"S": sku}, "available": {"N": str(available)}},
        )


def read_available(client: DynamoDBClient, table_name: str, sku: str) -> int | None:
    """The SKU's current stock (consistent read), or None when the SKU is not stocked."""
    response = client.get_item(TableName=table_name, Key={"sku": {"S": sku}}, ConsistentRead=True)
    item = response.get("Item")
    if item is None:
        return None
    return int(item["available"]["N"])
