"""Invoke's ClientContext reaches the handler as `context.client_context`, as the Lambda Python
runtime gives it (AgentCore Gateway's Lambda targets read their tool name from it), and the
local AWS refuses one that is not base64-encoded JSON as Lambda does, before any handler runs.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.environment import LocalAws


def echo_client_context(event: Any, context: Any) -> dict[str, Any]:
    client_context = context.client_context
    seen = None
    if client_context is not None:
        client = client_context.client
        seen = {
            "custom": client_context.custom,
            "env": client_context.env,
            "client": None if client is None else {"app_title": client.app_title},
        }
    # What each invoke's handler saw, where the test reads it (the handler runs in a worker).
    with Path(os.environ["SEEN_FILE"]).open("a", encoding="utf-8") as seen_file:
        seen_file.write(json.dumps(seen) + "\n")
    return {"client_context": seen}


def seen_by_the_handler(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def seen_file(tmp_path: Path) -> Path:
    return tmp_path / "seen.jsonl"


@pytest.fixture
def echo(fixture_local_aws: LocalAws, seen_file: Path) -> str:
    lambda_ = fixture_local_aws.client("lambda")
    role = lambda_.get_function_configuration(FunctionName="fx-RecordFunction")["Role"]
    lambda_.create_function(
        FunctionName="fx-Echo",
        Runtime="python3.12",
        Role=role,
        Handler=f"{__name__}.echo_client_context",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: the project's code runs
        Environment={"Variables": {"SEEN_FILE": str(seen_file)}},
    )
    return "fx-Echo"


def _encoded(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def _invoke(local: LocalAws, function: str, **request: Any) -> Any:
    response = local.client("lambda").invoke(FunctionName=function, Payload=b"{}", **request)
    assert "FunctionError" not in response
    return json.loads(response["Payload"].read())["client_context"]


def test_the_handler_sees_custom_env_and_client_of_the_client_context(
    fixture_local_aws: LocalAws, echo: str
) -> None:
    custom = {"bedrockAgentCoreToolName": "acme-replacements___get_replacement"}
    context = {"custom": custom, "env": {"locale": "en"}, "client": {"app_title": "agent"}}

    seen = _invoke(fixture_local_aws, echo, ClientContext=_encoded(context))

    assert seen == {"custom": custom, "env": {"locale": "en"}, "client": {"app_title": "agent"}}
    # Fields it leaves out are None, as in the runtime; without a ClientContext it is None.
    assert _invoke(fixture_local_aws, echo, ClientContext=_encoded({"custom": custom})) == {
        "custom": custom,
        "env": None,
        "client": None,
    }
    assert _invoke(fixture_local_aws, echo) is None


@pytest.mark.parametrize("client_context", ["not base64!", _encoded([1, 2]), "bm90IGpzb24="])
def test_a_client_context_that_is_not_base64_json_is_refused_before_the_handler_runs(
    fixture_local_aws: LocalAws, echo: str, client_context: str, seen_file: Path
) -> None:
    with pytest.raises(ClientError) as caught:
        fixture_local_aws.client("lambda").invoke(
            FunctionName=echo, Payload=b"{}", ClientContext=client_context
        )

    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidRequestContentException"
    assert error["Message"] == "Client context must be a valid Base64-encoded JSON object."
    assert seen_by_the_handler(seen_file) == []


def test_an_asynchronous_invoke_gets_no_client_context(
    fixture_local_aws: LocalAws, echo: str, seen_file: Path
) -> None:
    context = _encoded({"custom": {"k": "v"}})
    fixture_local_aws.client("lambda").invoke(
        FunctionName=echo, InvocationType="Event", Payload=b"{}", ClientContext=context
    )

    assert seen_by_the_handler(seen_file) == [None]
