"""Fixtures for tests against moto's in-process DynamoDB (never real AWS)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local_aws.tables import StackTables
from saga.aws import dynamodb_client
from saga.ledger import ActionLedger, LedgerPolicy
from saga_bench.metering import RequestCounter
from tests.integration.ledger_harness import (
    CountingDownstream,
    FakeClock,
    RecordingObserver,
    atomic_dynamodb_requests,
)
from tests.tables import SandboxTables

LEDGER_TABLE = "saga-ledger-test"


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and no endpoint override, so nothing can reach a real account."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def moto_aws(aws_credentials: None) -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(moto_aws: None) -> Any:
    """The low-level client the ledger uses in production (standard retries, timeouts; the
    trimmed model of the operations the Lambda code calls)."""
    return dynamodb_client()


@pytest.fixture
def admin_dynamodb(moto_aws: None) -> Any:
    """A client of botocore's whole DynamoDB model: tests create tables and scan with it."""
    return boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def sandbox_tables() -> SandboxTables:
    """The sandbox tables' names; a test module overrides this fixture to use other names."""
    return SandboxTables()


@pytest.fixture
def sandbox_client(moto_aws: None, sandbox_tables: SandboxTables, stack_tables: StackTables) -> Any:
    """A plain boto3 client (default retries, as the sandbox tests expect) with the sandbox
    tables created."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    stack_tables.create(client, sandbox_tables.outputs())
    return client


@pytest.fixture
def ledger_table(admin_dynamodb: Any, stack_tables: StackTables) -> str:
    stack_tables.create(admin_dynamodb, {"LedgerTableName": LEDGER_TABLE})
    return LEDGER_TABLE


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def observer() -> RecordingObserver:
    return RecordingObserver()


@pytest.fixture
def policy() -> LedgerPolicy:
    return LedgerPolicy(
        attempt_budget=5, retention_seconds=7 * 86400, lease_margin_seconds=30, min_lease_seconds=5
    )


@pytest.fixture
def ledger(
    dynamodb: Any,
    ledger_table: str,
    policy: LedgerPolicy,
    clock: FakeClock,
    observer: RecordingObserver,
) -> ActionLedger:
    return ActionLedger(ledger_table, dynamodb, policy, clock=clock, observer=observer)


@pytest.fixture
def downstream() -> CountingDownstream:
    return CountingDownstream()


@pytest.fixture
def request_counter(dynamodb: Any) -> RequestCounter:
    """DynamoDB calls made through the ledger's client, by operation (botocore before-call)."""
    return RequestCounter(dynamodb)


@pytest.fixture
def atomic_requests() -> Iterator[None]:
    with atomic_dynamodb_requests():
        yield
