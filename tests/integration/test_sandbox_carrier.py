"""The sandbox carrier against moto DynamoDB: no idempotency, lookup by reference, every fault."""

from __future__ import annotations

from typing import Any

import pytest

from saga.ports import (
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.ports.carrier import ShipmentReceipt, ShipmentRequest
from saga.sandbox.carrier import SandboxCarrier
from tests.tables import SandboxTables
from tests.tools_harness import ADDRESS

TABLES = SandboxTables()
CASE = "case-0001"
REF = "case-0001.ship"


def carrier(
    sandbox_client: Any, faults: list[str] | None = None, case_id: str = CASE
) -> SandboxCarrier:
    return SandboxCarrier.create(
        sandbox_client,
        shipments_table=TABLES.shipments,
        sandbox_table=TABLES.sandbox,
        case_id=case_id,
        faults=faults or [],
        clock=lambda: 1_700_000_000,
    )


def shipment_request(case_id: str = CASE, business_ref: str = REF) -> ShipmentRequest:
    return ShipmentRequest(
        case_id=case_id, business_ref=business_ref, address=ADDRESS, sku="SKU-RED-MUG", quantity=1
    )


def shipments_of(sandbox_client: Any, case_id: str = CASE) -> list[dict[str, Any]]:
    return list(
        sandbox_client.scan(
            TableName=TABLES.shipments,
            FilterExpression="case_id = :c",
            ExpressionAttributeValues={":c": {"S": case_id}},
            ConsistentRead=True,
        )["Items"]
    )


def test_create_makes_one_shipment_item_with_the_case_id(sandbox_client: Any) -> None:
    receipt = carrier(sandbox_client).create_shipment(shipment_request())

    items = shipments_of(sandbox_client)
    assert len(items) == 1
    item = items[0]
    assert item["shipment_id"] == {"S": receipt.shipment_id}
    assert item["case_id"] == {"S": CASE}
    assert item["business_ref"] == {"S": REF}
    assert item["address"]["M"]["city"] == {"S": "Springfield"}
    assert item["sku"] == {"S": "SKU-RED-MUG"}
    assert item["quantity"] == {"N": "1"}
    assert item["created_at"] == {"N": "1700000000"}
    assert receipt == ShipmentReceipt(receipt.shipment_id, REF, "created")


def test_no_idempotency_two_creates_with_one_reference_make_two_shipments(
    sandbox_client: Any,
) -> None:
    ships = carrier(sandbox_client)
    first = ships.create_shipment(shipment_request())
    second = ships.create_shipment(shipment_request())

    assert first.shipment_id != second.shipment_id
    assert len(shipments_of(sandbox_client)) == 2
    assert ships.find_shipments(REF) == [first, second]


def test_find_shipments_is_empty_for_an_unknown_reference_and_separates_references(
    sandbox_client: Any,
) -> None:
    ships = carrier(sandbox_client)
    assert ships.find_shipments(REF) == []
    other = ships.create_shipment(shipment_request(business_ref="case-0001.other"))

    assert ships.find_shipments(REF) == []
    assert ships.find_shipments("case-0001.other") == [other]


def test_lose_response_creates_the_shipment_then_times_out_and_lookup_finds_it(
    sandbox_client: Any,
) -> None:
    ships = carrier(sandbox_client, ["lose_response"])

    with pytest.raises(DownstreamTimeout, match="lost"):
        ships.create_shipment(shipment_request())

    items = shipments_of(sandbox_client)
    assert len(items) == 1
    assert [r.shipment_id for r in ships.find_shipments(REF)] == [items[0]["shipment_id"]["S"]]


def test_reject_creates_nothing(sandbox_client: Any) -> None:
    with pytest.raises(DownstreamRejected, match="refused the shipment") as caught:
        carrier(sandbox_client, ["reject"]).create_shipment(shipment_request())

    assert caught.value.downstream == "shipment"
    assert shipments_of(sandbox_client) == []


def test_timeout_creates_nothing(sandbox_client: Any) -> None:
    ships = carrier(sandbox_client, ["timeout"])
    with pytest.raises(DownstreamTimeout, match="no response"):
        ships.create_shipment(shipment_request())

    assert shipments_of(sandbox_client) == []
    assert ships.find_shipments(REF) == []


def test_fail_before_commit_creates_nothing_and_the_retry_creates_one(sandbox_client: Any) -> None:
    ships = carrier(sandbox_client, ["fail_before_commit"])
    with pytest.raises(DownstreamNotDispatched):
        ships.create_shipment(shipment_request())
    assert shipments_of(sandbox_client) == []

    ships.create_shipment(shipment_request())
    assert len(shipments_of(sandbox_client)) == 1


def test_unavailable_is_sticky_for_creates_and_lookups(sandbox_client: Any) -> None:
    ships = carrier(sandbox_client, ["lose_response", "unavailable"])
    with pytest.raises(DownstreamTimeout):
        ships.create_shipment(shipment_request())  # the shipment exists ...

    for _ in range(3):  # ... but from now on nobody can tell
        with pytest.raises(DownstreamUnavailable):
            ships.find_shipments(REF)
        with pytest.raises(DownstreamUnavailable):
            ships.create_shipment(shipment_request())
    assert len(shipments_of(sandbox_client)) == 1


def test_faults_are_consumed_in_order_across_creates_and_lookups(sandbox_client: Any) -> None:
    ships = carrier(sandbox_client, ["timeout", "reject", "lose_response"])

    with pytest.raises(DownstreamTimeout, match="no response"):  # 1: create, no effect
        ships.create_shipment(shipment_request())
    with pytest.raises(DownstreamRejected, match="refused the lookup"):  # 2: lookup refused
        ships.find_shipments(REF)
    with pytest.raises(DownstreamTimeout, match="lost"):  # 3: create, effect, answer lost
        ships.create_shipment(shipment_request())
    found = ships.find_shipments(REF)  # 4: exhausted, normal

    assert len(shipments_of(sandbox_client)) == 1
    assert [r.shipment_id for r in found] == [shipments_of(sandbox_client)[0]["shipment_id"]["S"]]


def test_an_incomplete_address_is_rejected_and_creates_nothing(sandbox_client: Any) -> None:
    request = ShipmentRequest(
        case_id=CASE,
        business_ref=REF,
        address={**ADDRESS, "postal_code": " "},
        sku="SKU-RED-MUG",
        quantity=1,
    )
    with pytest.raises(DownstreamRejected, match=r"address\.postal_code"):
        carrier(sandbox_client).create_shipment(request)

    assert shipments_of(sandbox_client) == []
