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
from typing import Any

from moto.awslambda.exceptions import LambdaClientError

from local_aws.lambda_context import LocalClient, LocalClientContext

CLIENT_CONTEXT_HEADER = "X-Amz-Client-Context"

__all__ = ["LocalClient", "LocalClientContext", "header_value", "parse_client_context"]


class InvalidClientContext(LambdaClientError):
    def __init__(self) -> None:
        super().__init__(
            "InvalidRequestContentException",
            "Client context must be a valid Base64-encoded JSON object.",
        )


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
    return LocalClientContext.from_json(value)


def header_value(headers: Any, name: str) -> str | None:
    """A request header, whatever the case of its name (moto hands over werkzeug's headers in
    the server, botocore's in `mock_aws`)."""
    for key, value in headers.items() if headers else ():
        if str(key).lower() == name.lower():
            return str(value)
    return None
