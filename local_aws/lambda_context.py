"""What a handler sees of the Lambda Python runtime, and how its answer is shaped.

Shared by the two ways the local AWS runs a handler: a worker process per concurrent invocation
(local_aws.lambda_worker, the default of a local server) and a call in the server's own
process (`mock_aws` tests, `handlers_in_process`). It imports nothing heavy (no moto), so a
worker's cold start pays only for the handler's own imports.

Requests a handler sends to the local AWS carry its invocation's id (`INVOKE_HEADER`), so the
server can tell a tool's request from anyone else's (the fault campaign's nemeses act on them);
an answer carrying `DIE_HEADER` ends the handler right after that request, as a process that
died there would (`SimulatedCrash`).
"""

from __future__ import annotations

import base64
import importlib
import json
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

from stacks.lambda_errors import Death

# The function whose handler runs in this thread (a ContextVar: other threads never see it).
_RUNNING_FUNCTION: ContextVar[str | None] = ContextVar("saga_local_function", default=None)
INVOKE_HEADER = "X-Saga-Invoke"
DIE_HEADER = "X-Saga-Die"
_TAG_MARK = "_saga_tags_invokes"
CLIENT_FIELDS = (
    "installation_id",
    "app_title",
    "app_version_name",
    "app_version_code",
    "app_package_name",
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, document: Mapping[str, Any] | None) -> LocalClientContext | None:
        if document is None:
            return None
        client = document.get("client")
        return cls(
            custom=document.get("custom"),
            env=document.get("env"),
            client=LocalClient(**{name: client.get(name) for name in CLIENT_FIELDS})
            if isinstance(client, Mapping)
            else None,
        )


@dataclass
class LocalLambdaContext:
    """The attributes of the Lambda Python runtime's context object that handlers use."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    timeout_seconds: float
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = ""
    identity: Any = None
    client_context: LocalClientContext | None = None
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self.log_stream_name = self.log_stream_name or f"local/[{self.function_version}]"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class SimulatedCrash(BaseException):
    """Raised inside handler code where its process dies (a crash, out of memory, its own
    timeout: `death`) before it answers. A BaseException, so no handler code catches it."""

    def __init__(self, detail: str, death: Death = Death.EXITED) -> None:
        super().__init__(detail)
        self.death = death


def running_function() -> str | None:
    """The function whose handler runs in the calling thread (None outside a handler)."""
    return _RUNNING_FUNCTION.get()


@contextmanager
def handler_running(function_name: str) -> Iterator[None]:
    """The calling thread runs `function_name`'s handler while the block runs."""
    token = _RUNNING_FUNCTION.set(function_name)
    try:
        yield
    finally:
        _RUNNING_FUNCTION.reset(token)


def load_handler(handler_path: str) -> Callable[[Any, Any], Any]:
    """Import `package.module.function` (the Lambda `Handler` property)."""
    module_name, _, attribute = handler_path.rpartition(".")
    if not module_name:
        raise ImportError(f"Handler {handler_path!r} is not of the form module.function")
    module = importlib.import_module(module_name)
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise ImportError(f"Handler {attribute!r} missing in module {module_name!r}")
    return handler  # type: ignore[no-any-return]


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The Python Lambda runtime's error shape: the class name is the error type."""
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


def import_error_payload(handler_path: str, exc: BaseException) -> dict[str, Any]:
    return {
        "errorType": "Runtime.ImportModuleError",
        "errorMessage": f"Unable to import module {handler_path!r}: {exc}",
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


@dataclass(frozen=True)
class HandlerAnswer:
    """What one handler call came to: moto's `(payload, errored, logs)`, or a death (`died`:
    how, and the local cause) that the runtime answers as Lambda answers a dead process."""

    payload: str
    errored: bool
    logs: str = ""
    died: tuple[Death, str] | None = None

    def to_json(self) -> dict[str, Any]:
        died = None if self.died is None else {"death": self.died[0].value, "detail": self.died[1]}
        return {"payload": self.payload, "errored": self.errored, "logs": self.logs, "died": died}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> HandlerAnswer:
        died = document.get("died")
        return cls(
            payload=str(document["payload"]),
            errored=bool(document["errored"]),
            logs=str(document.get("logs") or ""),
            died=None if not died else (Death(died["death"]), str(died["detail"])),
        )


def call_handler(handler: Callable[[Any, Any], Any], event: Any, context: Any) -> HandlerAnswer:
    """Run the handler and shape its answer as the Python Lambda runtime does."""
    try:
        result = handler(event, context)
    except SimulatedCrash as crash:
        return HandlerAnswer("", True, str(crash), died=(crash.death, str(crash)))
    except Exception as exc:
        logs = "".join(traceback.format_exception(exc))
        return HandlerAnswer(json.dumps(error_payload(exc)), True, logs)
    try:
        return HandlerAnswer(json.dumps(result), False)
    except (TypeError, ValueError) as exc:
        payload = {
            "errorType": "Runtime.MarshalError",
            "errorMessage": f"Unable to marshal response: {exc}",
            "stackTrace": [],
        }
        return HandlerAnswer(json.dumps(payload), True)


# -- requests a handler sends to the local AWS ----------------------------------------------------


def die_directive(death: Death, detail: str) -> str:
    """The value of DIE_HEADER: the handler dies (`death`) right after this request."""
    return f"{death.value}; {detail}"


def parse_die_directive(value: str) -> SimulatedCrash:
    death, _, detail = value.partition(";")
    return SimulatedCrash(detail.strip(), Death(death.strip()))


def tag_handler_requests(current_invoke: Callable[[], str | None]) -> None:
    """Every request botocore sends while `current_invoke()` names an invocation carries its id,
    and dies where the answer says so (idempotent: one wrapper of botocore's one send)."""
    from botocore.endpoint import Endpoint

    from local_aws.patching import wrap_once

    def wrap(original: Any) -> Any:
        def send(self: Any, request: Any) -> Any:
            invoke = current_invoke()
            if invoke is None:
                return original(self, request)
            request.headers[INVOKE_HEADER] = invoke
            response = original(self, request)
            directive = response.headers.get(DIE_HEADER)
            if directive:
                raise parse_die_directive(str(directive))
            return response

        return send

    wrap_once(Endpoint, "_send", _TAG_MARK, wrap)


# -- AWS call parameters across a process boundary ---------------------------------------------


def to_wire(value: Any) -> Any:
    """API parameters as JSON (bytes tagged, anything else unknown as text)."""
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(key): to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def from_wire(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {key: from_wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_wire(item) for item in value]
    return value
