"""Every AWS API call made in this process, with who made it: what IAM must allow whom.

A call is recorded (before it is sent) when a Lambda handler runs in the local runtime (the
caller is that function) or inside `acting_as(role)` (a person's flow: a sagactl command run as
the role its job uses, docs/design.md §11). Everything else (the tests' own set-up, the
executor, moto) is not recorded. botocore's one entry point for API calls is wrapped, so
clients made and cached before recording started are seen too. A handler in a worker process
sends each call to the server before making it (local_aws.lambda_worker), which records it
here (`record_worker_call`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from local_aws.lambda_context import running_function
from local_aws.patching import wrap_once

CallerKind = Literal["function", "role"]


@dataclass(frozen=True)
class AwsCall:
    """One AWS API call, and what IAM sees of it."""

    caller: str  # the local function's name, or the role a person's flow runs as
    kind: CallerKind
    service: str  # the signing name IAM knows ("states" for Step Functions, "dynamodb", ...)
    operation: str  # the API operation: "PutItem", "TransactWriteItems", ...
    params: Mapping[str, Any]
    region: str

    @property
    def function_name(self) -> str:
        if self.kind != "function":
            raise ValueError(f"{self.operation} was called by role {self.caller}, not a function")
        return self.caller


_ACTIVE: list[list[AwsCall]] = []
_ACTING_AS: ContextVar[str | None] = ContextVar("saga_local_acting_as", default=None)
_MARK = "_saga_records_calls"
_LOCK = threading.Lock()


def _record(client: Any, operation: str, params: Mapping[str, Any]) -> None:
    if not _ACTIVE:
        return
    function = running_function()
    role = _ACTING_AS.get()
    if function is not None:
        caller, kind = function, "function"
    elif role is not None:
        caller, kind = role, "role"
    else:
        return  # not a handler's or a person's call (the test, the executor, moto itself)
    call = AwsCall(
        caller=caller,
        kind=kind,  # type: ignore[arg-type]
        service=client.meta.service_model.signing_name,
        operation=operation,
        params=params,
        region=str(client.meta.region_name),
    )
    for calls in _ACTIVE:
        calls.append(call)


def _install() -> None:
    from botocore.client import BaseClient

    with _LOCK:

        def wrap(original: Any) -> Any:
            def recorded(self: Any, operation_name: str, api_params: Any) -> Any:
                _record(self, operation_name, api_params)
                return original(self, operation_name, api_params)

            return recorded

        wrap_once(BaseClient, "_make_api_call", _MARK, wrap)


def recording() -> bool:
    """Whether some block records calls now (a worker is told to send them)."""
    return bool(_ACTIVE)


def record_worker_call(function_name: str, call: Mapping[str, Any]) -> None:
    """A call a worker process sent: {"service", "operation", "params", "region"}."""
    recorded = AwsCall(
        caller=function_name,
        kind="function",
        service=str(call["service"]),
        operation=str(call["operation"]),
        params=call["params"],
        region=str(call["region"]),
    )
    for calls in list(_ACTIVE):
        calls.append(recorded)


@contextmanager
def recording_aws_calls() -> Iterator[list[AwsCall]]:
    """Collect every call that handlers (in this process or in workers) and `acting_as` blocks
    make meanwhile."""
    _install()
    calls: list[AwsCall] = []
    _ACTIVE.append(calls)
    try:
        yield calls
    finally:
        _ACTIVE.remove(calls)


@contextmanager
def acting_as(role: str) -> Iterator[None]:
    """The calls this thread makes in the block are `role`'s (a person's flow)."""
    token = _ACTING_AS.set(role)
    try:
        yield
    finally:
        _ACTING_AS.reset(token)
