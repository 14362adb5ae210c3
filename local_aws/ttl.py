"""DynamoDB Time to Live for the local AWS: moto stores a table's TTL setting but never deletes.

DynamoDB deletes an item some time after its TTL passes (typically within a few days; expired
items still show up in reads until then), and only when (DynamoDB developer guide, "Formatting
an item's TTL attribute"):
- the table's TTL is ENABLED, on the attribute name UpdateTimeToLive set;
- the item has that attribute as a top-level Number: a String, a set, a missing attribute... and
  the TTL processes ignore the item;
- its value, epoch seconds, is less than now, and at most five years in the past (an older
  value is ignored too).

`delete_expired_items(now)` applies these rules to every table of this process's moto. The local
AWS runs it when its clock is advanced (before the advance returns, so tests are deterministic)
and, in `sagactl local up`, on a periodic sweep as well (see local_aws/emulator.py).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

# "no more than five years in the past" (a calendar-free reading of five years)
MAX_PAST_SECONDS = 5 * 365 * 86400


def ttl_expired(value: Any, now: float) -> bool:
    """Whether a TTL attribute value (moto's DynamoType, or None when absent) has expired."""
    if value is None or getattr(value, "type", None) != "N":
        return False
    try:
        expires_at = Decimal(str(value.value))
    except InvalidOperation:
        return False
    if not expires_at.is_finite():
        return False
    return Decimal(str(now)) - MAX_PAST_SECONDS <= expires_at < Decimal(str(now))


def delete_expired_items(now: float) -> dict[str, int]:
    """Delete every item whose TTL has expired at `now`, in every account and region of this
    process's moto; {table name: items deleted} (tables with deletions only).

    Not atomic by itself: the caller holds the lock that serialises DynamoDB requests."""
    from moto.dynamodb.models import dynamodb_backends

    deleted: dict[str, int] = {}
    for regions in list(dynamodb_backends.values()):
        for backend in list(regions.values()):
            for table in list(backend.tables.values()):
                count = _delete_expired_in(table, now)
                if count:
                    deleted[table.name] = deleted.get(table.name, 0) + count
    return deleted


def _delete_expired_in(table: Any, now: float) -> int:
    setting = getattr(table, "ttl", None) or {}
    attribute = setting.get("AttributeName")
    if setting.get("TimeToLiveStatus") != "ENABLED" or not attribute:
        return 0
    expired = [item for item in table.all_items() if ttl_expired(item.attrs.get(attribute), now)]
    for item in expired:
        # Table.delete_item also writes the REMOVE stream record; indexes are derived from items.
        table.delete_item(item.hash_key, item.range_key)
    return len(expired)
