"""DynamoDB request units as AWS bills them, metered in the local AWS (`make bench`).

On-demand DynamoDB bills read and write request units, not requests. Each request the local
AWS serves while a meter is active is billed here from the items it touched, as they were
before and after it (read from moto's tables inside the request, which the local AWS makes
atomic), by AWS's rules:

- item size: attribute names plus values; a number 1 byte per two significant digits plus 1; a
  list or map 3 bytes plus 1 per element; a boolean or null 1 byte
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html);
- a read: 1 unit per 4 KB, strongly consistent, half for an eventually consistent one, at
  least one such unit even when nothing is found; a Query or Scan: the items it returned, summed
  before rounding;
- a write: 1 unit per 1 KB of the larger of the item before and after (PutItem, UpdateItem,
  DeleteItem: the deleted item); a conditional write whose condition failed: the size of the
  item it would have written if one exists, else 1 unit (for an UpdateItem, whose new item is not
  known then, the item as it is);
- a transaction: every item twice, once to prepare and once to commit (TransactWriteItems);
  a ConditionCheck as a write of its item
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html,
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html
  "Capacity management for transactions"; the archived guide,
  awsdocs/amazon-dynamodb-developer-guide doc_source/ProvisionedThroughput.md, has the same
  rules for provisioned capacity).

- a secondary index: a write that changes what an index holds is billed on the index too, 1 unit
  per 1 KB of the index entry (the item as the index projects it: every attribute for ALL, the
  table's and the index's keys for KEYS_ONLY, plus the named ones for INCLUDE):
  "If you write a new item to the table that defines an indexed attribute, or you update an
  existing item to define a previously undefined indexed attribute, one write operation is
  required to put the item into the index. If an update to the table changes the value of an
  indexed key attribute (from A to B), two writes are required, one to delete the previous item
  from the index and another write to put the new item into the index. If an item was present
  in the index, but a write to the table caused the indexed attribute to be deleted, one write
  is required to delete the old item projection from the index. If an item is not present in
  the index before or after the item is updated, there is no additional write cost for the
  index. If an update to the table only changes the value of projected attributes in the index
  key schema, but does not change the value of any indexed key attribute, then one write is
  required to update the values of the projected attributes into the index." and "Larger index
  entries will require additional write capacity units"
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes;
  the archived guide, doc_source/GSI.md, has the same text). So: put (the new entry), delete
  (the old entry), key change (both, each rounded on its own), update of a projected attribute
  (the larger of the old and new entry, as a table write). An entry the write leaves identical
  (a ConditionCheck, a change outside a narrower projection) costs nothing: "if a write to a
  table does not require a global secondary index update, then no write capacity is consumed
  from the index". The 100 bytes "of overhead per index item" the guide names under "Storage
  Considerations" are storage, like a table item's, not added to the entry's size here.

Cases AWS documents no figure for are assumptions, named, each the costlier reading: a
transaction that is cancelled is billed its prepare phase (each item once) and no index write;
one answered from its ClientRequestToken without being applied again is billed a strongly
consistent read of each item; a transaction's index writes are billed twice, like its items
(the transactions guide says only that "changes made with transactions are propagated to
global secondary indexes (GSIs) [...] after the transaction completes successfully", not how
often they are billed). A failed conditional write changes no index: no index write. An
operation not listed here is recorded as unmetered, never silently free.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from local_aws.patching import wrap_once

KB = 1024
READ_UNIT_BYTES = 4 * KB
WRITE_UNIT_BYTES = KB
_MARK = "_saga_request_units"
_WRITES = ("put_item", "update_item", "delete_item")
_READS = ("get_item", "query", "scan")
_OTHERS = ("batch_get_item", "batch_write_item", "transact_get_items")
# The failures that still consume units: the request ran and its condition said no.
_BILLED_FAILURES = frozenset({"ConditionalCheckFailed", "TransactionCanceledException"})
_ACTIVE: list[RequestUnits] = []
_LOCK = threading.Lock()


# --- item sizes ----------------------------------------------------------------------------------
def attribute_size(value: Mapping[str, Any]) -> int:
    """The size of one attribute value in DynamoDB's wire format (without its name)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode("utf-8"))
    if kind == "N":
        return number_size(str(inner))
    if kind == "B":
        return len(_raw_bytes(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(v).encode("utf-8")) for v in inner)
    if kind == "NS":
        return sum(number_size(str(v)) for v in inner)
    if kind == "BS":
        return sum(len(_raw_bytes(v)) for v in inner)
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + attribute_size(v) + 1 for k, v in inner.items())
    raise ValueError(f"not a DynamoDB attribute value: {kind}")


def number_size(text: str) -> int:
    """1 byte per two significant digits (leading and trailing zeros trimmed), plus 1."""
    digits = format(abs(Decimal(text)), "f").replace(".", "").strip("0")
    return math.ceil(max(len(digits), 1) / 2) + 1


def item_size(item: Mapping[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def _raw_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else base64.b64decode(value)


# --- secondary indexes ---------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexWrite:
    """What one write did to one secondary index, as billed (a transaction's twice)."""

    table: str
    index: str
    kind: str  # "put", "delete", "update" (a projected attribute), "key change"
    units: int
    entry_size: int  # bytes, the larger index entry


def index_entry(item: Mapping[str, Any] | None, index: Any) -> dict[str, Any] | None:
    """The entry `index` (moto's GSI or LSI) holds for `item`, None when it holds none: a
    sparse index holds only items that have every one of its key attributes."""
    keys = [key["AttributeName"] for key in index.schema]
    if not item or any(key not in item for key in keys):
        return None
    projection = index.projection or {}
    kind = projection.get("ProjectionType", "ALL")
    if kind == "ALL":
        return dict(item)
    names = {*index.table_key_attrs, *keys}
    if kind == "INCLUDE":
        names |= set(projection.get("NonKeyAttributes", []))
    return {name: value for name, value in item.items() if name in names}


def index_write(
    table: str,
    index: Any,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> IndexWrite | None:
    """The write an item's change from `before` to `after` costs `index` (module docstring)."""
    old, new = index_entry(before, index), index_entry(after, index)
    if old is None or new is None:
        entry, kind = (new, "put") if old is None else (old, "delete")
        if entry is None:
            return None  # in the index neither before nor after
        size = item_size(entry)
        return IndexWrite(table, index.name, kind, write_units(size), size)
    if old == new:
        return None  # the index holds the same entry: no index update
    keys = [key["AttributeName"] for key in index.schema]
    sizes = (item_size(old), item_size(new))
    if any(old[key] != new[key] for key in keys):
        units = write_units(sizes[0]) + write_units(sizes[1])
        return IndexWrite(table, index.name, "key change", units, max(sizes))
    return IndexWrite(table, index.name, "update", write_units(max(sizes)), max(sizes))


# --- the meter -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Billed:
    """One request as billed: what, on which tables, how many units (the tables' own, and its
    secondary indexes' apart), the largest item."""

    operation: str
    tables: tuple[str, ...]
    read_units: float
    write_units: float  # the tables' items
    largest_item: int  # bytes
    note: str = ""
    index_writes: tuple[IndexWrite, ...] = ()

    @property
    def index_write_units(self) -> int:
        return sum(write.units for write in self.index_writes)


@dataclass
class RequestUnits:
    """What the requests served while the meter was active were billed."""

    billed: list[Billed] = field(default_factory=list)
    unmetered: list[str] = field(default_factory=list)

    def read_units(self, tables: set[str] | None = None) -> float:
        return sum(b.read_units for b in self.billed if _on(b, tables))

    def write_units(self, tables: set[str] | None = None) -> float:
        """The tables' own write units (their indexes' apart: index_write_units)."""
        return sum(b.write_units for b in self.billed if _on(b, tables))

    def index_write_units(self, tables: set[str] | None = None) -> int:
        """The write units the secondary indexes of `tables` were billed."""
        return sum(
            w.units
            for b in self.billed
            for w in b.index_writes
            if tables is None or w.table in tables
        )


def _on(billed: Billed, tables: set[str] | None) -> bool:
    return tables is None or bool(set(billed.tables) & tables)


@contextmanager
def metering_request_units() -> Iterator[RequestUnits]:
    """Bill every DynamoDB request the local AWS serves inside the block."""
    install_request_units()
    meter = RequestUnits()
    with _LOCK:
        _ACTIVE.append(meter)
    try:
        yield meter
    finally:
        with _LOCK:
            _ACTIVE.remove(meter)


def install_request_units() -> None:
    """Wrap moto's DynamoDB operations (idempotent): each bills the active meter, if any. They
    run inside DynamoHandler.call_action, which the local AWS makes atomic, so the items read
    before and after a request are the ones it changed."""
    from moto.dynamodb.responses import DynamoHandler

    for name in (*_WRITES, *_READS, "transact_write_items", *_OTHERS):
        wrap_once(DynamoHandler, name, _MARK, _metered(name))


def _metered(name: str) -> Any:
    def wrap(original: Any) -> Any:
        def metered(self: Any) -> Any:
            with _LOCK:
                meters = list(_ACTIVE)
            if not meters:
                return original(self)
            billed = _Billing(name, self.body, self.dynamodb_backend)
            try:
                result = original(self)
            except Exception as exc:
                bill = billed.failed(type(exc).__name__)
                _record(meters, bill, name)
                raise
            _record(meters, billed.done(result), name)
            return result

        return metered

    return wrap


def _record(meters: list[RequestUnits], bill: Billed | None, name: str) -> None:
    with _LOCK:
        for meter in meters:
            if bill is None:
                meter.unmetered.append(name)
            else:
                meter.billed.append(bill)


class _Billing:
    """One request: the items it touches as they were before it, then what it is billed."""

    def __init__(self, operation: str, body: Mapping[str, Any], backend: Any) -> None:
        self.operation = operation
        self.body = body
        self.backend = backend
        self.targets: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = []
        try:
            if operation == "transact_write_items":
                self.targets = [_target(item, backend) for item in body.get("TransactItems", [])]
            elif operation in (*_WRITES, "get_item"):
                self.targets = [_target({"_": body}, backend, operation)]
            self.before = [self._item(table, key) for table, key, _, _ in self.targets]
        except Exception:  # a request DynamoDB refuses (no key, no table): it answers that
            self.targets, self.before = [], []

    def _item(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self.backend.get_item(table, dict(key))
        return None if found is None else dict(found.to_json()["Attributes"])

    def done(self, result: Any) -> Billed | None:
        op = self.operation
        if op in _OTHERS:
            return None
        if op in ("query", "scan"):
            items = _result_items(result)
            size = sum(item_size(i) for i in items)
            consistent = bool(self.body.get("ConsistentRead"))
            return Billed(
                op, (str(self.body["TableName"]),), read_units(size, consistent=consistent), 0, size
            )
        if not self.targets and op != "transact_write_items":
            return None  # served, though its items could not be read: not billed here
        after = [self._item(table, key) for table, key, _, _ in self.targets]
        if op == "get_item":
            size = item_size(self.before[0])
            consistent = bool(self.body.get("ConsistentRead"))
            return Billed(op, self._tables(), read_units(size, consistent=consistent), 0, size)
        sizes = [
            max(item_size(old), item_size(new)) for old, new in zip(self.before, after, strict=True)
        ]
        indexes = self._index_writes(after)
        if op != "transact_write_items":
            return Billed(op, self._tables(), 0, write_units(sizes[0]), sizes[0], "", indexes)
        if after == self.before:
            # answered from its ClientRequestToken, nothing applied again (an assumption: a read)
            units = sum(read_units(item_size(i), consistent=True) for i in after)
            return Billed(op, self._tables(), units, 0, max(sizes), "token replay")
        # Every item twice (prepare, commit), and its index writes twice too (the costlier
        # reading: the guide leaves it open).
        twice = tuple(dataclasses.replace(w, units=2 * w.units) for w in indexes)
        units = 2 * sum(write_units(s) for s in sizes)
        return Billed(op, self._tables(), 0, units, max(sizes), "", twice)

    def _index_writes(self, after: list[dict[str, Any] | None]) -> tuple[IndexWrite, ...]:
        """What the change of each item from before to `after` cost its table's indexes."""
        found = []
        for (table, _, _, _), old, new in zip(self.targets, self.before, after, strict=True):
            schema = self.backend.get_table(table)
            for index in [*schema.global_indexes, *schema.indexes]:
                write = index_write(table, index, old, new)
                if write is not None:
                    found.append(write)
        return tuple(found)

    def failed(self, error: str) -> Billed | None:
        op = self.operation
        if op in _OTHERS:
            return None
        if error not in _BILLED_FAILURES or not self.targets:
            # refused before it ran (validation, throttling, a reused token): not billed
            return Billed(op, self._tables(), 0, 0, 0, error)
        if op == "transact_write_items":
            # cancelled: billed its prepare phase (an assumption), every item once
            sizes = [
                max(item_size(old), item_size(new))
                for old, (_, _, new, _) in zip(self.before, self.targets, strict=True)
            ]
            units = sum(write_units(s) for s in sizes)
            return Billed(op, self._tables(), 0, units, max(sizes, default=0), f"{error}")
        old = self.before[0]
        _, _, new, _ = self.targets[0]
        if old is None:
            return Billed(op, self._tables(), 0, 1, 0, error)
        size = item_size(new) if op == "put_item" else item_size(old)
        return Billed(op, self._tables(), 0, write_units(size), size, error)

    def _tables(self) -> tuple[str, ...]:
        return tuple(table for table, _, _, _ in self.targets)


def _target(
    action: Mapping[str, Any], backend: Any, operation: str | None = None
) -> tuple[str, dict[str, Any], dict[str, Any] | None, str]:
    """(table, key, the item a Put writes or None, the action) of one request or transaction
    item."""
    ((kind, body),) = action.items()
    kind = operation or kind
    table = str(body["TableName"])
    if kind in ("Put", "put_item"):
        item = dict(body["Item"])
        schema = backend.get_table(table)
        names = [schema.hash_key_attr] + ([schema.range_key_attr] if schema.range_key_attr else [])
        return table, {n: item[n] for n in names}, item, kind
    return table, dict(body["Key"]), None, kind


def _result_items(result: Any) -> list[Mapping[str, Any]]:
    value = getattr(result, "result", result)
    if isinstance(value, Mapping):
        return list(value.get("Items", []))
    return []


__all__ = [
    "Billed",
    "IndexWrite",
    "RequestUnits",
    "attribute_size",
    "index_entry",
    "index_write",
    "install_request_units",
    "item_size",
    "metering_request_units",
    "number_size",
    "read_units",
    "write_units",
]
