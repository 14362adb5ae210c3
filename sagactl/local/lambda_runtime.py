"""Lambda invokes served in-process: moto's Docker runner replaced by a direct handler call.

moto calls `LambdaFunction._invoke_lambda(event)` and expects `(payload, errored, logs)`. An
errored payload `{"errorType", "errorMessage", "stackTrace"}` becomes the Lambda FunctionError
whose `errorType` the Step Functions interpreter uses as the error name, exactly as the Python
Lambda runtime reports a raised exception (class name). Invoke's ClientContext reaches the
handler as `context.client_context` (sagactl.local.client_context), which moto drops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import io
import json
import logging
import os
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sagactl.local.client_context import (
    CLIENT_CONTEXT_HEADER,
    LocalClientContext,
    header_value,
    parse_client_context,
)
from sagactl.local.lambda_errors import CrashNaming, crash_naming_from_env, crash_payload
from stacks.lambda_errors import Death

logger = logging.getLogger(__name__)

FAKE_CREDENTIALS: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

# One invoke at a time: handlers share os.environ, module globals and stdout with the server.
_INVOKE_LOCK = threading.Lock()
_INSTALL_LOCK = threading.Lock()
# The function whose handler runs in this thread (a ContextVar: other threads never see it).
_RUNNING_FUNCTION: ContextVar[str | None] = ContextVar("saga_local_function", default=None)
# The ClientContext of the Invoke request this thread serves (moto's invoke -> _invoke_lambda).
_CLIENT_CONTEXT: ContextVar[LocalClientContext | None] = ContextVar(
    "saga_local_client_context", default=None
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


@dataclass(frozen=True)
class RuntimeSettings:
    """What every in-process invoke sees besides its function's own environment."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    crash_errors: CrashNaming = CrashNaming.CURRENT  # how a function that died is named


class _Runtime:
    settings = RuntimeSettings()


def configure_runtime(
    endpoint_url: str | None,
    region: str = "us-east-1",
    crash_errors: CrashNaming | None = None,
) -> None:
    """Set the endpoint that handlers' boto3 clients use (the local server; None in mock_aws),
    and how a function that died is named (default: $SAGA_LOCAL_CRASH_ERRORS, else current)."""
    _Runtime.settings = RuntimeSettings(
        endpoint_url=endpoint_url,
        region=region,
        crash_errors=crash_errors or crash_naming_from_env(),
    )


def current_runtime() -> RuntimeSettings:
    return _Runtime.settings


def restore_runtime(settings: RuntimeSettings) -> None:
    _Runtime.settings = settings


@contextmanager
def crash_errors_named(naming: CrashNaming) -> Iterator[None]:
    """Name a function that died this way while the block runs (tests of both namings)."""
    previous = _Runtime.settings
    _Runtime.settings = dataclasses.replace(previous, crash_errors=naming)
    try:
        yield
    finally:
        _Runtime.settings = dataclasses.replace(
            _Runtime.settings, crash_errors=previous.crash_errors
        )


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


class _ListedInOneStep(os._Environ):  # type: ignore[type-arg]  # (os._Environ is untyped)
    """os.environ whose items and copies are read in one step. Each invoke applies its
    function's variables and removes them afterwards, while other threads list the environment
    (moto's Step Functions interpreter creates a boto3 client, which lists the proxy variables):
    listed key by key, a key removed meanwhile raised KeyError in that thread (seen by the fault
    campaign as a States.Runtime at ValidateCase of a concurrent duplicate)."""

    def _snapshot(self) -> dict[str, str]:
        data = dict(self._data)  # type: ignore[attr-defined]  # one C-level copy, atomic (GIL)
        return {self.decodekey(k): self.decodevalue(v) for k, v in data.items()}

    def items(self) -> Any:
        return self._snapshot().items()

    def copy(self) -> dict[str, str]:
        return self._snapshot()


def _environment_listed_in_one_step() -> None:
    if not isinstance(os.environ, _ListedInOneStep):
        os.environ.__class__ = _ListedInOneStep


@contextmanager
def applied_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `variables` applied, restored exactly afterwards (nothing leaks)."""
    _environment_listed_in_one_step()
    saved = dict(os.environ)
    os.environ.update(variables)
    try:
        yield
    finally:
        # Undo key by key (never clear()): other threads read os.environ meanwhile.
        for key in set(os.environ) - set(saved):
            os.environ.pop(key, None)
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def invoke_environment(
    context: LocalLambdaContext, *, handler: str, function_variables: Mapping[str, Any]
) -> dict[str, str]:
    """The process environment of one invoke: the runtime's variables for the function the
    context names, then the function's own."""
    settings = _Runtime.settings
    env: dict[str, str] = {
        **FAKE_CREDENTIALS,
        "AWS_REGION": settings.region,
        "AWS_DEFAULT_REGION": settings.region,
        "AWS_LAMBDA_FUNCTION_NAME": context.function_name,
        "AWS_LAMBDA_FUNCTION_VERSION": context.function_version,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(context.memory_limit_in_mb),
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(context.timeout_seconds)),
        "AWS_EXECUTION_ENV": "AWS_Lambda_python_local",
        "_HANDLER": handler,
        # No X-Ray daemon here; tracing on AWS is configured by the stack.
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    if settings.endpoint_url:
        env["AWS_ENDPOINT_URL"] = settings.endpoint_url
    env.update({key: str(value) for key, value in function_variables.items()})
    return env


class SimulatedCrash(BaseException):
    """Raised by a test's nemesis inside handler code: the function's process ends there (a
    crash, out of memory, its own timeout: `death`) before it answers. A BaseException, so no
    handler code catches it."""

    def __init__(self, detail: str, death: Death = Death.EXITED) -> None:
        super().__init__(detail)
        self.death = death


def running_function() -> str | None:
    """The function whose handler runs in the calling thread (None outside an invoke): a
    nemesis that acts inside handler code (a crash, a clock jump) tells handler calls apart."""
    return _RUNNING_FUNCTION.get()


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The Python Lambda runtime's error shape: the class name is the error type."""
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


def invoke_in_process(
    *,
    handler_path: str,
    event: Any,
    function_name: str,
    function_arn: str,
    version: str,
    memory_mb: int,
    timeout: float,
    variables: Mapping[str, Any],
    client_context: LocalClientContext | None = None,
) -> tuple[str, bool, str]:
    """Run the handler for one invoke; returns moto's `(payload, errored, logs)`."""
    context = LocalLambdaContext(
        function_name=function_name,
        function_version=version,
        invoked_function_arn=function_arn,
        memory_limit_in_mb=memory_mb,
        timeout_seconds=timeout,
        client_context=client_context,
    )
    env = invoke_environment(context, handler=handler_path, function_variables=variables)
    with _INVOKE_LOCK, applied_environment(env):
        try:
            handler = load_handler(handler_path)
        except Exception as exc:
            logger.exception("cannot import handler %s of %s", handler_path, function_name)
            payload = {
                "errorType": "Runtime.ImportModuleError",
                "errorMessage": f"Unable to import module {handler_path!r}: {exc}",
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
            return json.dumps(payload), True, "".join(traceback.format_exception(exc))
        running = _RUNNING_FUNCTION.set(function_name)
        try:
            result = handler(event, context)
        except SimulatedCrash as crash:
            # What Lambda answers for a process that ended before it answered.
            logger.debug("%s died (%s): %s", function_name, crash.death, crash)
            answer = crash_payload(
                crash.death,
                _Runtime.settings.crash_errors,
                request_id=context.aws_request_id,
                timeout_seconds=context.timeout_seconds,
                detail=str(crash),
            )
            return json.dumps(answer), True, answer["errorMessage"]
        except Exception as exc:
            logger.debug("%s raised %s: %s", function_name, type(exc).__name__, exc)
            return (
                json.dumps(error_payload(exc)),
                True,
                "".join(traceback.format_exception(exc)),
            )
        finally:
            _RUNNING_FUNCTION.reset(running)
    try:
        return json.dumps(result), False, ""
    except (TypeError, ValueError) as exc:
        payload = {
            "errorType": "Runtime.MarshalError",
            "errorMessage": f"Unable to marshal response: {exc}",
            "stackTrace": [],
        }
        return json.dumps(payload), True, ""


def _moto_invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """Replacement for moto.awslambda.models.LambdaFunction._invoke_lambda."""
    if event is None:
        event = {}
    elif isinstance(event, str | bytes):
        # moto passes the string "{}" for an empty body.
        event = json.loads(event) if event else {}
    return invoke_in_process(
        handler_path=str(self.handler),
        event=event,
        function_name=str(self.function_name),
        function_arn=str(self.function_arn),
        version=str(self.version),
        memory_mb=int(self.memory_size),
        timeout=float(self.timeout),
        variables=dict(self.environment_vars or {}),
        client_context=_CLIENT_CONTEXT.get(),
    )


def _with_client_context(invoke: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `LambdaFunction.invoke(body, request_headers, response_headers)`, with the
    request's ClientContext for the handler: refused as Lambda refuses it when it is not
    base64-encoded JSON, and given to synchronous invocations only."""

    @functools.wraps(invoke)
    def invoke_with_context(self: Any, body: Any, request_headers: Any, response: Any) -> Any:
        client_context = parse_client_context(header_value(request_headers, CLIENT_CONTEXT_HEADER))
        kind = header_value(request_headers, "X-Amz-Invocation-Type") or "RequestResponse"
        token = _CLIENT_CONTEXT.set(client_context if kind == "RequestResponse" else None)
        try:
            return invoke(self, body, request_headers, response)
        finally:
            _CLIENT_CONTEXT.reset(token)

    invoke_with_context.saga_client_context = True  # type: ignore[attr-defined]
    return invoke_with_context


def install_inprocess_lambda() -> None:
    """Make moto run every Lambda invoke through the in-process runtime (idempotent)."""
    from moto.awslambda.models import LambdaFunction

    with _INSTALL_LOCK:
        LambdaFunction._invoke_lambda = _moto_invoke_lambda  # type: ignore[method-assign]
        if not getattr(LambdaFunction.invoke, "saga_client_context", False):
            LambdaFunction.invoke = _with_client_context(  # type: ignore[method-assign]
                LambdaFunction.invoke
            )


@contextmanager
def quiet_handlers(log_path: Path | None) -> Iterator[None]:
    """In-process handlers print JSON logs to stdout: send them to a file (or drop them)."""
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    logging.getLogger("moto").setLevel(logging.CRITICAL)  # the executor logs every caught error
    sink: TextIO
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        sink = log_path.open("w", encoding="utf-8")
    else:
        sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink):
            yield
    finally:
        sink.close()
