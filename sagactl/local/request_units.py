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

Two cases AWS documents no figure for are assumptions, named: a transaction that is cancelled is
billed its prepare phase (each item once), and one answered from its ClientRequestToken without
being applied again is billed a strongly consistent read of each item. An operation not listed
here is recorded as unmetered, never silently free.
"""

from __future__ import annotations

import base64
import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sagactl.local.patching import wrap_once

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


# --- the meter -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Billed:
    """One request as billed: what, on which tables, how many units, the largest item."""

    operation: str
    tables: tuple[str, ...]
    read_units: float
    write_units: float
    largest_item: int  # bytes
    note: str = ""


@dataclass
class RequestUnits:
    """What the requests served while the meter was active were billed."""

    billed: list[Billed] = field(default_factory=list)
    unmetered: list[str] = field(default_factory=list)

    def read_units(self, tables: set[str] | None = None) -> float:
        return sum(b.read_units for b in self.billed if _on(b, tables))

    def write_units(self, tables: set[str] | None = None) -> float:
        return sum(b.write_units for b in self.billed if _on(b, tables))


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
        if op != "transact_write_items":
            return Billed(op, self._tables(), 0, write_units(sizes[0]), sizes[0])
        if after == self.before:
            # answered from its ClientRequestToken, nothing applied again (an assumption: a read)
            units = sum(read_units(item_size(i), consistent=True) for i in after)
            return Billed(op, self._tables(), units, 0, max(sizes), "token replay")
        return Billed(op, self._tables(), 0, 2 * sum(write_units(s) for s in sizes), max(sizes))

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
    "RequestUnits",
    "attribute_size",
    "install_request_units",
    "item_size",
    "metering_request_units",
    "number_size",
    "read_units",
    "write_units",
]
