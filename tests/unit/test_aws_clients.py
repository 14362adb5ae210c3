import boto3
import pytest

from saga.aws import downstream_dynamodb_client, dynamodb_client, kms_client
from sagactl.trim_models import expected_files


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
    assert ledger.meta.config.retries["total_max_attempts"] == 3
    assert downstream.meta.config.retries["total_max_attempts"] == 1
    assert downstream.meta.config.read_timeout == 5.0

    # Another endpoint (the local emulator, a test server) never gets a client of the first.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    other = dynamodb_client()
    assert other is not ledger
    assert other.meta.endpoint_url == "http://127.0.0.1:2"


def test_the_tools_kms_client_loads_the_trimmed_model_and_leaves_kms_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:3")
    boto3.client("dynamodb")  # a client first, as in a handler: the loader has listed services

    client = kms_client()

    model = client.meta.service_model
    assert (model.service_name, model.signing_name) == ("saga-kms", "kms")
    assert model.operation_names == ["GetPublicKey"]
    assert client.meta.endpoint_url == "http://127.0.0.1:3"
    assert client.meta.config.retries["total_max_attempts"] == 3
    # Every other KMS client in the process still gets botocore's whole model.
    assert "Sign" in boto3.client("kms").meta.service_model.operation_names


def test_the_trimmed_models_are_current() -> None:
    """`python -m sagactl.trim_models` rewrites them from the installed botocore."""
    for path, content in expected_files().items():
        assert path.read_text(encoding="utf-8") == content, f"{path}: run sagactl.trim_models"
