"""Building the sandbox adapters from the Lambda environment (docs/architecture.md variables)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from saga.adapters.carrier import SandboxCarrier, ShipmentRequest
from saga.adapters.errors import DownstreamTimeout
from saga.adapters.payments import RefundRequest, SandboxPaymentProvider
from saga.sandbox.schema import SandboxTables, create_sandbox_tables
from saga.settings import ConfigurationError

TABLES = SandboxTables(
    payments="env-payments", shipments="env-shipments", sandbox="env-sandbox", inventory="env-inv"
)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PAYMENTS_TABLE": TABLES.payments,
        "SHIPMENTS_TABLE": TABLES.shipments,
        "SANDBOX_TABLE": TABLES.sandbox,
        "DOWNSTREAM_TIMEOUT_SECONDS": "3",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_sandbox_tables(dynamodb, TABLES)
        yield dynamodb


def count(client: Any, table: str) -> int:
    return int(client.scan(TableName=table, Select="COUNT")["Count"])


def test_payment_provider_from_env_uses_the_named_tables_and_the_case_faults(client: Any) -> None:
    payments = SandboxPaymentProvider.from_env(case_id="case-env", faults=["lose_response"])
    request = RefundRequest("case-env", "case-env.refund", "pay-1", 500, "EUR")

    with pytest.raises(DownstreamTimeout):
        payments.refund(request, idempotency_key="acme#refund#case-env.refund")
    receipt = payments.refund(request, idempotency_key="acme#refund#case-env.refund")

    assert count(client, TABLES.payments) == 1
    assert payments.find_refunds("case-env.refund") == [receipt]


def test_key_retention_comes_from_the_environment(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYMENT_KEY_RETENTION_SECONDS", "60")
    now = [1_000_000.0]
    payments = SandboxPaymentProvider.from_env(case_id="case-env", clock=lambda: now[0])
    request = RefundRequest("case-env", "case-env.refund", "pay-1", 500, "EUR")

    payments.refund(request, idempotency_key="k1")
    now[0] += 59
    payments.refund(request, idempotency_key="k1")
    assert count(client, TABLES.payments) == 1
    now[0] += 1
    payments.refund(request, idempotency_key="k1")
    assert count(client, TABLES.payments) == 2


def test_carrier_from_env_uses_the_named_tables(client: Any) -> None:
    ships = SandboxCarrier.from_env(case_id="case-env")
    address = {"name": "A", "line1": "1 St", "city": "C", "postal_code": "1", "country": "US"}

    receipt = ships.create_shipment(ShipmentRequest("case-env", "case-env.ship", address, "S", 1))

    assert count(client, TABLES.shipments) == 1
    assert ships.find_shipments("case-env.ship") == [receipt]


def test_a_missing_table_variable_is_a_clear_configuration_error(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHIPMENTS_TABLE")
    with pytest.raises(ConfigurationError, match="SHIPMENTS_TABLE"):
        SandboxCarrier.from_env(case_id="case-env")


def test_unknown_fault_names_are_refused_at_construction(client: Any) -> None:
    with pytest.raises(ValueError, match=r"sandbox.faults.refund\[1\]: unknown fault 'explode'"):
        SandboxPaymentProvider.from_env(case_id="case-env", faults=["timeout", "explode"])
