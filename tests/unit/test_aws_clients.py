from typing import Any

import pytest

from saga.aws import downstream_dynamodb_client, dynamodb_client


def test_clients_are_made_once_per_configuration_and_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    ledger = dynamodb_client()
    downstream = downstream_dynamodb_client(5.0)

    assert dynamodb_client() is ledger  # reused across invocations of a warm container
    assert downstream_dynamodb_client(5.0) is downstream
    assert downstream is not ledger
    # botocore's Config sets its options as attributes at run time; the stubs do not list them.
    ledger_config: Any = ledger.meta.config
    downstream_config: Any = downstream.meta.config
    assert ledger_config.retries["total_max_attempts"] == 3
    assert downstream_config.retries["total_max_attempts"] == 1
    assert downstream_config.read_timeout == 5.0

    # Another endpoint (the local emulator, a test server) never gets a client of the first.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    other = dynamodb_client()
    assert other is not ledger
    assert other.meta.endpoint_url == "http://127.0.0.1:2"
