"""Sandbox data for a fresh local (or sandbox) account."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Per SKU: plenty, a little, none (design.md §8: stock that is too low gives OutOfStock).
DEFAULT_SANDBOX_STOCK: Mapping[str, int] = {
    "SKU-RED-MUG": 100,
    "SKU-BLUE-MUG": 5,
    "SKU-NONE": 0,
}


def seed_inventory(
    dynamodb: Any, table_name: str, stock: Mapping[str, int] = DEFAULT_SANDBOX_STOCK
) -> None:
    """Write one inventory item per SKU (`sku`, integer `available`), replacing what is there.

    `dynamodb` is a boto3 DynamoDB client.
    """
    for sku, available in stock.items():  # all checked before anything is written
        if not sku or isinstance(available, bool) or not isinstance(available, int):
            raise ValueError(f"invalid stock entry {sku!r}: {available!r}")
        if available < 0:
            raise ValueError(f"stock of {sku} cannot be negative: {available}")
    for sku, available in stock.items():
        dynamodb.put_item(
            TableName=table_name,
            Item={"sku": {"S": sku}, "available": {"N": str(available)}},
        )
