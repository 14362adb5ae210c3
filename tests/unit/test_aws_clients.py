import ast
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.config import Config

import saga.aws
from saga.aws import downstream_dynamodb_client, dynamodb_client, kms_client
from saga_build.trim_models import TRIMMED, expected_files
from sagactl.paths import PROJECT_ROOT


def test_clients_are_made_once_per_configuration_and_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    ledger = dynamodb_client()
    downstream = downstream_dynamodb_client(5.0)

    assert dynamodb_client() is ledger  # reused across invocations of a warm container
    assert downstream_dynamodb_client(5.0) is downstream
    assert downstream_dynamodb_client(5) is downstream  # an int timeout is the same configuration
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
    client = kms_client()

    model = client.meta.service_model
    assert (model.service_name, model.signing_name) == ("kms", "kms")
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
        assert (model.service_name, model.signing_name) == ("dynamodb", "dynamodb")
        assert model.operation_names == list(TRIMMED["dynamodb"])
        assert client.meta.endpoint_url == "http://127.0.0.1:4"
        # Its events are DynamoDB's: hooks such as the tests' and the campaign's still fire.
        client.meta.events.register("before-call.dynamodb.GetItem", answer)
        item = client.get_item(TableName="t", Key={"k": {"S": "v"}})
        assert item["Item"] == {"k": {"S": "v"}}
    assert answered == ["GetItem", "GetItem"]
    # Every other DynamoDB client in the process still gets botocore's whole model.
    assert "Scan" in boto3.client("dynamodb").meta.service_model.operation_names


@pytest.mark.parametrize(
    ("service", "receivers"),
    [
        ("dynamodb", ("client", "dynamodb")),
        ("stepfunctions", ("stepfunctions",)),
        ("sqs", ("sqs",)),
    ],
)
def test_each_trimmed_model_has_every_operation_the_lambda_code_calls(
    service: str, receivers: tuple[str, ...]
) -> None:
    """A call of an operation the trimmed model lacks would fail on AWS with AttributeError:
    every `<client>.<operation>(` in lambdas/saga (a receiver named like the service's client:
    `client`, `self._dynamodb`, `self.stepfunctions`, `self._sqs`) must name a kept operation."""
    kept_operations = TRIMMED[service]
    client = boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]
    all_operations = client.meta.method_to_api_mapping
    called = set()
    for path in Path(PROJECT_ROOT / "lambdas" / "saga").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                name = receiver.attr if isinstance(receiver, ast.Attribute) else ""
                name = receiver.id if isinstance(receiver, ast.Name) else name
                if node.func.attr in all_operations and any(r in name for r in receivers):
                    called.add(all_operations[node.func.attr])
    kept = set(kept_operations)
    assert called, f"no {service} call found: the scan is broken"
    assert called <= kept, f"add {sorted(called - kept)} to saga_build/trim_models.py"
    assert {xform_name(op) for op in kept} <= set(all_operations)


def test_the_trimmed_models_are_current() -> None:
    """`python -m saga_build.trim_models` rewrites them from the installed botocore."""
    for path, content in expected_files().items():
        assert path.read_text(encoding="utf-8") == content, f"{path}: run saga_build.trim_models"


def test_a_package_without_the_trimmed_data_uses_botocores_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Slower, never wrong: without the trimmed directory, boto3's default session and
    botocore's own service."""
    monkeypatch.setattr(saga.aws, "TRIMMED_MODELS", tmp_path)
    saga.aws._trimmed_session.cache_clear()
    try:
        assert saga.aws._session_for("dynamodb") is boto3._get_default_session()
    finally:
        monkeypatch.undo()
        saga.aws._trimmed_session.cache_clear()
    assert saga.aws._session_for("dynamodb") is saga.aws._trimmed_session()


def test_the_tools_session_reads_the_trimmed_data_alone_and_leaves_the_default_session() -> None:
    """What makes a first client cheap: the loader lists two services, not botocore's ~400,
    and parses the trimmed endpoints.json; no other session in the process sees either."""
    session = saga.aws._trimmed_session()
    assert session is not None
    loader = session._session.get_component("data_loader")
    assert loader.search_paths[0] == str(saga.aws.TRIMMED_MODELS)
    assert not any(path.endswith("botocore/data") for path in loader.search_paths)
    assert loader.list_available_services("service-2") == sorted(TRIMMED)
    default = boto3._get_default_session()._session.get_component("data_loader")
    assert str(saga.aws.TRIMMED_MODELS) not in default.search_paths
    assert len(default.list_available_services("service-2")) > 300


class _Body:
    def stream(self, **_: Any) -> Any:
        return iter([b"{}"])


def _sent(client: Any, operation: str, params: dict[str, Any]) -> tuple[str, str]:
    """The URL and the signature's credential scope of one request (answered, never sent)."""
    seen: list[tuple[str, str]] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        authorization = request.headers["Authorization"].decode()
        scope = authorization.split("Credential=")[1].split(",")[0].split("/", 2)[2]
        seen.append((request.url, scope.rsplit("/", 1)[0]))
        return AWSResponse(request.url, 200, HTTPHeaders(), _Body())

    client.meta.events.register_first("before-send", answer)
    getattr(client, operation)(**params)
    return seen[0]


@pytest.mark.parametrize(
    ("service", "operation", "params"),
    [
        ("dynamodb", "get_item", {"TableName": "t", "Key": {"k": {"S": "v"}}}),
        ("kms", "get_public_key", {"KeyId": "alias/k"}),
        (
            "stepfunctions",
            "describe_execution",
            {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:m:e"},
        ),
        ("sqs", "send_message", {"QueueUrl": "https://q/1/q", "MessageBody": "m"}),
    ],
)
def test_the_trimmed_clients_resolve_and_sign_as_botocores_in_every_partition(
    monkeypatch: pytest.MonkeyPatch, service: str, operation: str, params: Any
) -> None:
    """The trimmed endpoints.json keeps every partition: in each one's regions (one not yet
    listed included), with FIPS or dual-stack endpoints, a request of the Lambda code's client
    goes to the URL and is signed for the region and service that botocore's own client uses."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for name in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    session = saga.aws._trimmed_session()
    assert session is not None
    partitions = boto3._get_default_session()._session.get_component("data_loader")
    regions = ["us-east-1", "eu-west-1", "ap-southeast-2", "us-east-9", "aws-global"]
    for partition in partitions.load_data("partitions")["partitions"]:
        regions.extend(sorted(partition["regions"])[:1])
    compared = 0
    for region in regions:
        once: Any = {"total_max_attempts": 1}
        for config in (
            Config(retries=once),
            Config(retries=once, use_fips_endpoint=True),
            Config(retries=once, use_dualstack_endpoint=True),
        ):
            answers = []
            for client in (
                session.client(service, region_name=region, config=config),  # type: ignore[call-overload]
                boto3.client(service, region_name=region, config=config),  # type: ignore[call-overload]
            ):
                assert len(client.meta.service_model.operation_names) > 0
                try:
                    answers.append(_sent(client, operation, params))
                except Exception as exc:  # both must refuse alike (no endpoint there)
                    answers.append((type(exc).__name__, str(exc)))
            assert answers[0] == answers[1], (region, config)
            compared += 1
    assert compared >= 3 * 6


def test_the_layer_pins_the_botocore_the_trimmed_data_comes_from() -> None:
    """The trimmed data is written from the installed botocore (and checked current above): the
    layer must install the same release, or the functions would run another botocore's rules
    over it."""
    import botocore

    pins = (PROJECT_ROOT / "lambdas" / "requirements.txt").read_text(encoding="utf-8")
    assert f"botocore=={botocore.__version__}" in pins.splitlines()


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


def test_credentials_from_elsewhere_than_the_environment_are_the_default_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An assumed-role profile, web identity or SSO needs an STS or SSO client, which the
    trimmed data lacks: without keys in the environment, the trimmed session resolves
    credentials through the default session's provider; with them (a Lambda function), its own
    provider reads them and the default session is never made."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    saga.aws._trimmed_session.cache_clear()
    try:
        session = saga.aws._trimmed_session()
        assert session is not None
        default = boto3._get_default_session()._session
        provider = session._session.get_component("credential_provider")
        assert provider is default.get_component("credential_provider")

        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
        saga.aws._trimmed_session.cache_clear()
        session = saga.aws._trimmed_session()
        assert session is not None
        own = session._session.get_component("credential_provider")
        assert own is not default.get_component("credential_provider")
        assert own.load_credentials().access_key == "AKIDEXAMPLE"
    finally:
        saga.aws._trimmed_session.cache_clear()


def test_configured_endpoints_can_be_ignored_as_botocore_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9")
    assert saga.aws.endpoint_url("sqs") == "http://127.0.0.1:9"
    assert saga.aws.endpoint_url("dynamodb") == "http://127.0.0.1:8"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert saga.aws.endpoint_url("sqs") is None
    assert saga.aws.endpoint_url("dynamodb") is None


def test_a_dynamodb_answer_with_a_wrong_checksum_is_retried_as_botocore_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """botocore's standard retries repeat a DynamoDB call whose answer fails its x-amz-crc32
    check, for the service named `dynamodb` only: the trimmed model keeps the name."""
    import zlib

    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:10")
    body = b'{"Item": {"k": {"S": "v"}}}'
    checksums = [str(zlib.crc32(body) ^ 1), str(zlib.crc32(body))]  # the first one is wrong
    sent: list[str] = []

    class Body:
        def stream(self, **_: Any) -> Any:
            return iter([body])

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.append(request.url)
        headers = HTTPHeaders()
        headers["x-amz-crc32"] = checksums[len(sent) - 1]
        return AWSResponse(request.url, 200, headers, Body())

    client = dynamodb_client()
    hook: Any = answer  # the stubs type event handlers as returning None
    client.meta.events.register_first("before-send.dynamodb.GetItem", hook)
    monkeypatch.setattr("time.sleep", lambda _: None)  # the retry's backoff
    try:
        item = client.get_item(TableName="t", Key={"k": {"S": "v"}})
    finally:
        client.meta.events.unregister("before-send.dynamodb.GetItem", hook)
    assert len(sent) == 2
    assert item["Item"] == {"k": {"S": "v"}}
