"""Invoke's ClientContext as the Lambda Python runtime hands it to a handler.

Invoke carries it base64-encoded in the `X-Amz-Client-Context` header (the API's `ClientContext`
parameter); Lambda refuses one that is not base64-encoded JSON (InvalidRequestContentException,
"Client context must be a valid Base64-encoded JSON object.") and passes it to synchronous
invocations only. The runtime (awslambdaric's lambda_context) makes `context.client_context` an
object with `custom`, `env` and `client` (each None when absent), and None without one: an
AgentCore Gateway's Lambda target reads its tool name and ids from `custom`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.awslambda.exceptions import LambdaClientError

CLIENT_CONTEXT_HEADER = "X-Amz-Client-Context"
CLIENT_FIELDS = (
    "installation_id",
    "app_title",
    "app_version_name",
    "app_version_code",
    "app_package_name",
)


class InvalidClientContext(LambdaClientError):
    def __init__(self) -> None:
        super().__init__(
            "InvalidRequestContentException",
            "Client context must be a valid Base64-encoded JSON object.",
        )


@dataclass(frozen=True)
class LocalClient:
    """`context.client_context.client`: the mobile SDK's client fields."""

    installation_id: Any = None
    app_title: Any = None
    app_version_name: Any = None
    app_version_code: Any = None
    app_package_name: Any = None


@dataclass(frozen=True)
class LocalClientContext:
    """`context.client_context`."""

    custom: Any = None
    env: Any = None
    client: LocalClient | None = None


def parse_client_context(encoded: str | None) -> LocalClientContext | None:
    """The context object of Invoke's ClientContext (None without one); InvalidClientContext
    when it is not base64-encoded JSON, as Lambda answers."""
    if not encoded:
        return None
    try:
        value = json.loads(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError):
        raise InvalidClientContext() from None
    if not isinstance(value, dict):
        raise InvalidClientContext()
    client = value.get("client")
    return LocalClientContext(
        custom=value.get("custom"),
        env=value.get("env"),
        client=LocalClient(**{name: client.get(name) for name in CLIENT_FIELDS})
        if isinstance(client, Mapping)
        else None,
    )


def header_value(headers: Any, name: str) -> str | None:
    """A request header, whatever the case of its name (moto hands over werkzeug's headers in
    the server, botocore's in `mock_aws`)."""
    for key, value in headers.items() if headers else ():
        if str(key).lower() == name.lower():
            return str(value)
    return None
