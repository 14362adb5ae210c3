"""The stack's tables on a target: case records, ledger records, stock, sandbox effects.

Every read is consistent: an operator looks at what just happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from saga.cases import CaseOutcome
from saga.identity import case_action_keys
from saga.ledger import ActionLedger, LedgerPolicy, LedgerRecord
from saga.ports.inventory import RESERVATION_HELD
from saga.sandbox.faults import cursor_key
from saga.sandbox.inventory import seed_inventory
from saga.tools.sweeper import StuckAction, StuckActionSweeper
from sagactl.target import Target
from sagactl.views.case import STEP_OPERATIONS, ActionView, record_summary
from sagactl.views.plain import from_item


# --- the cases table -----------------------------------------------------------------------------
def read_case_record(target: Target, case_id: str) -> dict[str, Any] | None:
    response = target.client("dynamodb").get_item(
        TableName=target.output("CasesTableName"),
        Key={"case_id": {"S": case_id}},
        ConsistentRead=True,
    )
    item = response.get("Item")
    return from_item(item) if item else None


def scan_case_records(
    target: Target,
    *,
    condition: str,
    values: Mapping[str, Any],
    page_size: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Case records that pass a filter (a Scan: the cases table has only its key), every page."""
    pages = (
        target.client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=target.output("CasesTableName"),
            FilterExpression=condition,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            PaginationConfig={"PageSize": page_size} if page_size else {},
        )
    )
    for page in pages:
        for item in page.get("Items", []):
            yield from_item(item)


# --- the action ledger ---------------------------------------------------------------------------
def ledger_for(target: Target, policy: LedgerPolicy | None = None) -> ActionLedger:
    """The stack's ledger; `policy` matters only to writes (a person's settlement)."""
    return ActionLedger(
        target.output("LedgerTableName"),
        target.client("dynamodb"),
        policy or LedgerPolicy(),
        clock=target.now,
    )


def ledger_record(target: Target, key: str) -> LedgerRecord | None:
    return ledger_for(target).get(key)


def case_actions(target: Target, tenant_id: str, case_id: str, budget: int) -> list[ActionView]:
    """Each of the case's actions, in saga order, with its ledger record (None: no record)."""
    ledger = ledger_for(target)
    keys = case_action_keys(tenant_id, case_id)
    actions = []
    for step in STEP_OPERATIONS:
        record = ledger.get(keys[step])
        actions.append(
            ActionView(step, keys[step], record_summary(record, budget) if record else None)
        )
    return actions


def stuck_actions(target: Target, grace_seconds: int) -> list[StuckAction]:
    """The open actions whose lease ended more than `grace_seconds` ago: the sweeper's own
    query, nothing sent."""
    sweeper = StuckActionSweeper(
        dynamodb=target.client("dynamodb"),
        sqs=target.client("sqs"),  # required by the sweeper; `stuck` only reads, never sends
        ledger_table=target.output("LedgerTableName"),
        escalation_queue_url=target.optional_output("EscalationQueueUrl") or "",
        grace_seconds=grace_seconds,
        clock=target.now,
    )
    return sweeper.find_stuck()


# --- stock ---------------------------------------------------------------------------------------
def stock_levels(target: Target) -> dict[str, int]:
    """Every SKU's available stock, by SKU."""
    client = target.client("dynamodb")
    levels: dict[str, int] = {}
    pages = client.get_paginator("scan").paginate(
        TableName=target.output("InventoryTableName"), ConsistentRead=True
    )
    for page in pages:
        for item in page["Items"]:
            available = item.get("available", {}).get("N")
            if "sku" in item and available is not None:  # anything else is not a stock level
                levels[item["sku"]["S"]] = int(available)
    return dict(sorted(levels.items()))


def stock_level(target: Target, sku: str) -> int:
    item = target.client("dynamodb").get_item(
        TableName=target.output("InventoryTableName"), Key={"sku": {"S": sku}}, ConsistentRead=True
    )["Item"]
    return int(item["available"]["N"])


# A case in these outcomes may still release what it holds (a closed case releases nothing).
UNDER_WAY = (CaseOutcome.IN_PROGRESS.value, CaseOutcome.COMPENSATION_PENDING.value)


def stock_held_under_way(target: Target, skus: Iterable[str]) -> dict[str, dict[str, int]]:
    """sku -> {case id: quantity} of the HELD reservations of `skus` whose case is still under
    way: a release would give that stock back on top of whatever level is set now. A Scan of
    the reservations table (keyed by reservation only), then one read per held reservation's
    case."""
    wanted = set(skus)
    held: dict[str, dict[str, int]] = {}
    pages = (
        target.client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=target.output("ReservationsTableName"),
            FilterExpression="#status = :held",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":held": {"S": RESERVATION_HELD}},
            ConsistentRead=True,
        )
    )
    for page in pages:
        for item in map(from_item, page.get("Items", [])):
            sku, case_id = item.get("sku"), item.get("case_id")
            if sku not in wanted or not isinstance(case_id, str):
                continue
            record = read_case_record(target, case_id)
            if record is not None and record.get("outcome") in UNDER_WAY:
                held.setdefault(str(sku), {})[case_id] = int(item.get("quantity", 0))
    return held


def set_stock(target: Target, stock: Mapping[str, int]) -> None:
    """Set (not add to) the available stock of each SKU."""
    seed_inventory(target.client("dynamodb"), target.output("InventoryTableName"), stock)


# --- effects at the sandbox downstreams ----------------------------------------------------------
def count_items(target: Target, table: str, case_id: str) -> int:
    """Items in a sandbox table with this top-level `case_id` (duplicates show up as counts)."""
    paginator = target.client("dynamodb").get_paginator("scan")
    total = 0
    for page in paginator.paginate(
        TableName=table,
        FilterExpression="case_id = :case",
        ExpressionAttributeValues={":case": {"S": case_id}},
        Select="COUNT",
        ConsistentRead=True,
    ):
        total += int(page.get("Count", 0))
    return total


def read_effects(target: Target, case_id: str, keys: dict[str, str] | None) -> dict[str, Any]:
    """Refunds and shipments made for the case (None: not deployed) and its reservation."""
    effects: dict[str, Any] = {}
    for name, output in (("refunds", "PaymentsTableName"), ("shipments", "ShipmentsTableName")):
        table = target.optional_output(output)
        effects[name] = count_items(target, table, case_id) if table else None
    reservations = target.optional_output("ReservationsTableName")
    if reservations and keys:
        item = (
            target.client("dynamodb")
            .get_item(
                TableName=reservations,
                Key={"reservation_id": {"S": keys["reserve"]}},
                ConsistentRead=True,
            )
            .get("Item")
        )
        reservation = from_item(item) if item else None
        effects["reservation"] = (
            {
                key: reservation.get(key)
                for key in ("status", "sku", "quantity", "released_by")
                if key in reservation
            }
            if reservation
            else None
        )
    return effects


def faults_used(target: Target, case_id: str, downstream: str) -> int:
    """How many of the case's sandbox faults for `downstream` its calls have drawn."""
    item = (
        target.client("dynamodb")
        .get_item(
            TableName=target.output("SandboxTableName"),
            Key={"pk": {"S": cursor_key(case_id, downstream)}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return int(item["cursor"]["N"]) if item else 0
