"""Sandbox data for a fresh local account: the stock levels live with the sandbox itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.sandbox.inventory import DEFAULT_STOCK
from saga.sandbox.inventory import seed_inventory as _seed

# Per SKU: plenty, a little, none (docs/design.md §8: stock that is too low gives OutOfStock).
DEFAULT_SANDBOX_STOCK: Mapping[str, int] = DEFAULT_STOCK


def seed_inventory(
    dynamodb: Any, table_name: str, stock: Mapping[str, int] = DEFAULT_SANDBOX_STOCK
) -> None:
    """Write one inventory item per SKU (`sku`, integer `available`); bad input writes nothing."""
    _seed(dynamodb, table_name, stock)
