"""The AWS calls handlers make, recorded for the tests that compare them with IAM grants
(tests/e2e/test_grants_match_calls.py): `recording_aws_calls()`.

A handler in the server's process is seen by a wrapper of botocore's one entry point for API
calls; a handler in a worker process sends each call to the server before making it
(sagactl.local.lambda_worker), which records it here (`record_worker_call`). Either way a call
is recorded before it is sent, with the function that made it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sagactl.local.patching import wrap_once

_RECORDING_MARK = "_saga_records_calls"
_INSTALL_LOCK = threading.Lock()
_ACTIVE_RECORDINGS: list[list[AwsCall]] = []


@dataclass(frozen=True)
class AwsCall:
    """One AWS API call made by a handler (what IAM must allow its role)."""

    function_name: str
    service: str  # the signing name, the service IAM knows: "dynamodb", "states", ...
    operation: str  # the API operation: "PutItem", "TransactWriteItems", ...
    params: Mapping[str, Any]


def recording() -> bool:
    """Whether some block records calls now (a worker is told to send them)."""
    return bool(_ACTIVE_RECORDINGS)


def record(call: AwsCall) -> None:
    for calls in list(_ACTIVE_RECORDINGS):
        calls.append(call)


def record_worker_call(function_name: str, call: Mapping[str, Any]) -> None:
    """A call a worker process sent (`{"service", "operation", "params"}`)."""
    record(AwsCall(function_name, str(call["service"]), str(call["operation"]), call["params"]))


def install_call_recording(running_function: Callable[[], str | None]) -> None:
    """Wrap botocore's one entry point for API calls in this process (idempotent), so clients a
    handler made and cached before recording started are seen too."""
    from botocore.client import BaseClient

    with _INSTALL_LOCK:

        def wrap(original: Any) -> Any:
            def recorded(self: Any, operation_name: str, api_params: Any) -> Any:
                function_name = running_function()
                if function_name is not None and _ACTIVE_RECORDINGS:
                    service = self.meta.service_model.signing_name
                    record(AwsCall(function_name, service, operation_name, api_params))
                return original(self, operation_name, api_params)

            return recorded

        wrap_once(BaseClient, "_make_api_call", _RECORDING_MARK, wrap)


@contextmanager
def recording_aws_calls() -> Iterator[list[AwsCall]]:
    """Collect every AWS API call that handlers make while the block runs, each with the
    function that made it (tests compare them with the functions' IAM grants)."""
    calls: list[AwsCall] = []
    _ACTIVE_RECORDINGS.append(calls)
    try:
        yield calls
    finally:
        _ACTIVE_RECORDINGS.remove(calls)
