"""Building the sandbox adapters from the function's environment (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.ports import DownstreamTimeout
from saga.ports.carrier import ShipmentRequest
from saga.ports.payments import RefundRequest
from saga.settings import ConfigurationError, CreateShipmentEnvironment, IssueRefundEnvironment
from saga.tools.wiring import sandbox_carrier, sandbox_payment_provider
from tests.tables import SandboxTables
from tests.tools_harness import APPROVAL_KEYS_JSON

TABLES = SandboxTables(
    payments="env-payments", shipments="env-shipments", sandbox="env-sandbox", inventory="env-inv"
)


@pytest.fixture
def sandbox_tables() -> SandboxTables:
    return TABLES


@pytest.fixture(autouse=True)
def table_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables the refund and shipment functions read, naming this module's tables."""
    for name, value in {
        "POWERTOOLS_SERVICE_NAME": "adapters-test",
        "POWERTOOLS_METRICS_NAMESPACE": "SagaTest",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "LEDGER_TABLE": "env-ledger",
        "CASES_TABLE": "env-cases",
        "ATTEMPT_BUDGET": "8",
        "RETENTION_SECONDS": "2592000",
        "LEASE_MARGIN_SECONDS": "10",
        "PAYMENT_KEY_RETENTION_SECONDS": "86400",
        "PAYMENTS_TABLE": TABLES.payments,
        "SHIPMENTS_TABLE": TABLES.shipments,
        "SANDBOX_TABLE": TABLES.sandbox,
        "DOWNSTREAM_TIMEOUT_SECONDS": "3",
        "APPROVAL_KEYS": APPROVAL_KEYS_JSON,
        "APPROVAL_THRESHOLDS": "{}",
        "REFUND_CEILINGS": "{}",
        "LIMITS_TABLE": "env-limits",
    }.items():
        monkeypatch.setenv(name, value)


def count(sandbox_client: Any, table: str) -> int:
    return int(sandbox_client.scan(TableName=table, Select="COUNT")["Count"])


def test_payment_provider_from_settings_uses_the_named_tables_and_the_case_faults(
    sandbox_client: Any,
) -> None:
    payments = sandbox_payment_provider(
        IssueRefundEnvironment.from_env(),
        sandbox_client,
        case_id="case-env",
        faults=["lose_response"],
    )
    request = RefundRequest("case-env", "case-env.refund", "pay-1", 500, "EUR")

    with pytest.raises(DownstreamTimeout):
        payments.refund(request, idempotency_key="acme#refund#case-env.refund")
    receipt = payments.refund(request, idempotency_key="acme#refund#case-env.refund")

    assert count(sandbox_client, TABLES.payments) == 1
    assert payments.find_refunds("case-env.refund") == [receipt]


def test_key_retention_comes_from_the_environment(
    sandbox_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYMENT_KEY_RETENTION_SECONDS", "60")
    now = [1_000_000.0]
    payments = sandbox_payment_provider(
        IssueRefundEnvironment.from_env(), sandbox_client, case_id="case-env", clock=lambda: now[0]
    )
    request = RefundRequest("case-env", "case-env.refund", "pay-1", 500, "EUR")

    payments.refund(request, idempotency_key="k1")
    now[0] += 59
    payments.refund(request, idempotency_key="k1")
    assert count(sandbox_client, TABLES.payments) == 1
    now[0] += 1
    payments.refund(request, idempotency_key="k1")
    assert count(sandbox_client, TABLES.payments) == 2


def test_carrier_from_settings_uses_the_named_tables(sandbox_client: Any) -> None:
    ships = sandbox_carrier(
        CreateShipmentEnvironment.from_env(), sandbox_client, case_id="case-env"
    )
    address = {"name": "A", "line1": "1 St", "city": "C", "postal_code": "1", "country": "US"}

    receipt = ships.create_shipment(ShipmentRequest("case-env", "case-env.ship", address, "S", 1))

    assert count(sandbox_client, TABLES.shipments) == 1
    assert ships.find_shipments("case-env.ship") == [receipt]


def test_a_missing_table_variable_is_a_clear_configuration_error(
    sandbox_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHIPMENTS_TABLE")
    with pytest.raises(ConfigurationError, match="SHIPMENTS_TABLE"):
        sandbox_carrier(CreateShipmentEnvironment.from_env(), sandbox_client, case_id="case-env")


def test_unknown_fault_names_are_refused_at_construction(sandbox_client: Any) -> None:
    with pytest.raises(ValueError, match=r"sandbox.faults.refund\[1\]: unknown fault 'explode'"):
        sandbox_payment_provider(
            IssueRefundEnvironment.from_env(),
            sandbox_client,
            case_id="case-env",
            faults=["timeout", "explode"],
        )
