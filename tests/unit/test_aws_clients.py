import ast
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.awsrequest import AWSResponse, HTTPHeaders

import saga.aws
from saga.aws import downstream_dynamodb_client, dynamodb_client, kms_client
from sagactl.paths import PROJECT_ROOT
from sagactl.trim_models import TRIMMED, expected_files


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


def test_the_tools_dynamodb_clients_load_the_trimmed_model_and_leave_dynamodb_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4")

    # A before-call hook that answers stands in for the service: nothing is sent.
    answered: list[str] = []

    def answer(model: Any, **_: Any) -> Any:
        answered.append(model.name)
        return AWSResponse("http://127.0.0.1:4", 200, HTTPHeaders(), None), {
            "Item": {"k": {"S": "v"}}
        }

    for client in (dynamodb_client(), downstream_dynamodb_client(3.0)):
        model = client.meta.service_model
        assert (model.service_name, model.signing_name) == ("saga-dynamodb", "dynamodb")
        assert model.operation_names == list(TRIMMED["saga-dynamodb"][1])
        assert client.meta.endpoint_url == "http://127.0.0.1:4"
        # Its events are DynamoDB's: hooks such as the tests' and the campaign's still fire.
        client.meta.events.register("before-call.dynamodb.GetItem", answer)
        item = client.get_item(TableName="t", Key={"k": {"S": "v"}})
        assert item["Item"] == {"k": {"S": "v"}}
    assert answered == ["GetItem", "GetItem"]
    # Every other DynamoDB client in the process still gets botocore's whole model.
    assert "Scan" in boto3.client("dynamodb").meta.service_model.operation_names


def test_the_trimmed_dynamodb_model_has_every_operation_the_lambda_code_calls() -> None:
    """A call of an operation the trimmed model lacks would fail on AWS with AttributeError:
    every `<client>.<operation>(` in lambdas/saga (a receiver named like a client: `client`,
    `self._client`, `self._dynamodb`) must name a kept operation."""
    all_operations = boto3.client("dynamodb", region_name="us-east-1").meta.method_to_api_mapping
    called = set()
    for path in Path(PROJECT_ROOT / "lambdas" / "saga").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                name = receiver.attr if isinstance(receiver, ast.Attribute) else ""
                name = receiver.id if isinstance(receiver, ast.Name) else name
                if node.func.attr in all_operations and ("client" in name or "dynamodb" in name):
                    called.add(all_operations[node.func.attr])
    kept = set(TRIMMED["saga-dynamodb"][1])
    assert called, "no DynamoDB call found: the scan is broken"
    assert called <= kept, f"add {sorted(called - kept)} to sagactl/trim_models.py"
    assert {xform_name(op) for op in kept} <= set(all_operations)


def test_the_trimmed_models_are_current() -> None:
    """`python -m sagactl.trim_models` rewrites them from the installed botocore."""
    for path, content in expected_files().items():
        assert path.read_text(encoding="utf-8") == content, f"{path}: run sagactl.trim_models"


def test_a_package_without_a_trimmed_model_uses_botocores_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Slower, never wrong: a missing model directory is not announced to botocore's loader."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    boto3.client("dynamodb")  # the loader has listed its services
    monkeypatch.setattr(saga.aws, "TRIMMED_MODELS", tmp_path)

    assert saga.aws._trimmed_or_full("saga-dynamodb", "dynamodb") == "dynamodb"
    monkeypatch.undo()
    assert saga.aws._trimmed_or_full("saga-dynamodb", "dynamodb") == "saga-dynamodb"


def test_a_per_service_endpoint_reaches_the_trimmed_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS_ENDPOINT_URL_DYNAMODB (a VPC interface endpoint, DynamoDB Local) wins over
    AWS_ENDPOINT_URL as botocore has it; botocore itself would look for
    AWS_ENDPOINT_URL_SAGA_DYNAMODB, the trimmed model's own name."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:6")
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", "http://127.0.0.1:7")

    assert dynamodb_client().meta.endpoint_url == "http://127.0.0.1:6"
    assert downstream_dynamodb_client(2.0).meta.endpoint_url == "http://127.0.0.1:6"
    assert kms_client().meta.endpoint_url == "http://127.0.0.1:7"
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB")
    assert dynamodb_client().meta.endpoint_url == "http://127.0.0.1:5"
