"""Time in the local AWS: one movable clock for the handlers, Step Functions and DynamoDB TTL.

Retention rules can only be tested end to end if hours and days pass: the ledger's retention,
the payment provider's 24 h key retention, the 14-day redrive window. `clock.advance` jumps the
clock forward; what TTL expires is deleted before it returns.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from local_aws.environment import LocalAws
from saga import clock as saga_clock
from saga.identity import Operation, action_id_for, action_key
from stacks.config import SagaConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DAY = 86400
# The deployed (synthesized) configuration: what the local stack runs with.
CONFIG = SagaConfig.from_mapping(
    json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
)
RETENTION = CONFIG.ledger.retention_seconds
KEY_RETENTION = CONFIG.payment_key_retention_hours * 3600


def _put(local: LocalAws, output_key: str, item: dict[str, Any]) -> None:
    local.client("dynamodb").put_item(TableName=local.outputs[output_key], Item=item)


def _keys(local: LocalAws, output_key: str, key: str) -> set[str]:
    items = local.client("dynamodb").scan(TableName=local.outputs[output_key], ConsistentRead=True)[
        "Items"
    ]
    return {item[key]["S"] for item in items}


def _n(value: float) -> dict[str, str]:
    return {"N": str(int(value))}


def test_advancing_past_a_ttl_deletes_that_item_and_nothing_else(
    fixture_local_aws: LocalAws,
) -> None:
    local = fixture_local_aws
    ledger = local.outputs["LedgerTableName"]
    now = local.clock.now()
    open_item = {"open_status": {"S": "IN_PROGRESS"}, "lease_expires_at": _n(now + 30)}
    _put(
        local,
        "LedgerTableName",
        {"action_key": {"S": "in-1h"}, "expires_at": _n(now + 3600), **open_item},
    )
    _put(local, "LedgerTableName", {"action_key": {"S": "in-1d"}, "expires_at": _n(now + DAY)})
    _put(local, "LedgerTableName", {"action_key": {"S": "no-ttl"}})
    _put(
        local,
        "LedgerTableName",
        {"action_key": {"S": "text"}, "expires_at": {"S": str(int(now) - 60)}},
    )
    _put(
        local,
        "LedgerTableName",
        {"action_key": {"S": "ancient"}, "expires_at": _n(now - 6 * 365 * DAY)},
    )
    # The inventory table has no TTL setting: its expires_at means nothing to DynamoDB.
    _put(local, "InventoryTableName", {"sku": {"S": "SKU-X"}, "expires_at": _n(now - 60)})

    reading = local.clock.advance(2 * 3600)

    assert reading.effects["ttl_deleted"] == {ledger: 1}
    assert _keys(local, "LedgerTableName", "action_key") == {"in-1d", "no-ttl", "text", "ancient"}
    index = local.client("dynamodb").query(
        TableName=ledger,
        IndexName="open-actions",
        KeyConditionExpression="open_status = :s",
        ExpressionAttributeValues={":s": {"S": "IN_PROGRESS"}},
    )["Items"]
    assert index == []  # gone from the index too
    assert _keys(local, "InventoryTableName", "sku") >= {"SKU-X"}

    assert local.clock.advance(DAY).effects["ttl_deleted"] == {ledger: 1}
    assert _keys(local, "LedgerTableName", "action_key") == {"no-ttl", "text", "ancient"}


def test_an_expired_item_stays_readable_until_the_clock_moves(
    fixture_local_aws: LocalAws,
) -> None:
    """As on DynamoDB, expiry is not deletion: deletion happens later (here: at an advance or a
    sweep, never in the middle of a test)."""
    local = fixture_local_aws
    past = {"action_key": {"S": "expired"}, "expires_at": _n(local.clock.now() - 1)}
    _put(local, "LedgerTableName", past)
    assert _keys(local, "LedgerTableName", "action_key") == {"expired"}

    assert local.clock.advance(0).effects["ttl_deleted"] == {local.outputs["LedgerTableName"]: 1}
    assert _keys(local, "LedgerTableName", "action_key") == set()


def test_ttl_follows_update_time_to_live(fixture_local_aws: LocalAws) -> None:
    """Only the attribute the table names, and only while TTL is enabled."""
    local = fixture_local_aws
    ddb = local.client("dynamodb")
    inventory = local.outputs["InventoryTableName"]
    now = local.clock.now()
    _put(local, "InventoryTableName", {"sku": {"S": "A"}, "gone_at": _n(now + 60)})
    _put(local, "InventoryTableName", {"sku": {"S": "B"}, "expires_at": _n(now + 60)})
    ddb.update_time_to_live(
        TableName=inventory, TimeToLiveSpecification={"Enabled": True, "AttributeName": "gone_at"}
    )

    local.clock.advance(120)

    assert {"A", "B"} & _keys(local, "InventoryTableName", "sku") == {"B"}
    ledger_ttl = ddb.describe_time_to_live(TableName=local.outputs["LedgerTableName"])
    assert ledger_ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"


def test_reprovisioning_goes_back_to_real_time(fixture_local_aws: LocalAws) -> None:
    local = fixture_local_aws
    local.clock.advance(3 * DAY)
    assert saga_clock.now() - local.clock.now() == pytest.approx(0, abs=1)

    local.reprovision()

    assert local.clock.offset_seconds == 0
    assert local.clock.now() == pytest.approx(dt.datetime.now(dt.UTC).timestamp(), abs=5)


# -- the real stack ---------------------------------------------------------------------------


def _case(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return case


def test_the_execution_the_handlers_and_the_history_share_the_moved_clock(
    local_aws: LocalAws,
) -> None:
    local_aws.clock.advance(30 * DAY)
    moved = local_aws.clock.now()

    description, history = local_aws.run_case(_case("happy-path"))

    assert description["status"] == "SUCCEEDED"
    for moment in (description["startDate"], description["stopDate"], history[-1]["timestamp"]):
        assert moment.timestamp() == pytest.approx(moved, abs=60)
    # The handlers' writes: the ledger's retention counts from the moved clock.
    case = _case("happy-path")
    key = action_key(
        case["tenant_id"], Operation.RESERVE, action_id_for(case["case_id"], Operation.RESERVE)
    )
    record = local_aws.client("dynamodb").get_item(
        TableName=local_aws.outputs["LedgerTableName"], Key={"action_key": {"S": key}}
    )["Item"]
    assert float(record["expires_at"]["N"]) > moved
    assert float(record["expires_at"]["N"]) - moved == pytest.approx(RETENTION, abs=120)


def test_retention_runs_out_end_to_end_key_first_then_ledger(local_aws: LocalAws) -> None:
    """After a completed case: the payment provider forgets its idempotency key (24 h), the
    ledger forgets the actions after its retention; the refund, the shipment and the case record
    (no TTL) stay. This is the state a late resubmission or redrive meets."""
    description, _ = local_aws.run_case(_case("happy-path"))
    assert description["status"] == "SUCCEEDED"
    sandbox = local_aws.outputs["SandboxTableName"]
    ledger = local_aws.outputs["LedgerTableName"]
    keys_before = {
        pk for pk in _keys(local_aws, "SandboxTableName", "pk") if pk.startswith("idem#")
    }
    assert keys_before, "the refund left no idempotency key record"
    ledger_before = _keys(local_aws, "LedgerTableName", "action_key")
    assert len(ledger_before) == 3  # reserve, refund, shipment

    assert KEY_RETENTION + 60 < RETENTION
    after_a_day = local_aws.clock.advance(KEY_RETENTION + 60)

    assert after_a_day.effects["ttl_deleted"].get(sandbox, 0) >= len(keys_before)
    assert not {pk for pk in _keys(local_aws, "SandboxTableName", "pk") if pk.startswith("idem#")}
    assert _keys(local_aws, "LedgerTableName", "action_key") == ledger_before

    after_retention = local_aws.clock.advance(RETENTION)

    assert after_retention.effects["ttl_deleted"][ledger] == 3
    assert _keys(local_aws, "LedgerTableName", "action_key") == set()
    assert len(_keys(local_aws, "PaymentsTableName", "refund_id")) == 1
    assert len(_keys(local_aws, "ShipmentsTableName", "shipment_id")) == 1
    assert _keys(local_aws, "CasesTableName", "case_id") == {_case("happy-path")["case_id"]}
