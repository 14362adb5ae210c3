"""The local Lambda runtime: moto's Docker runner replaced by the project's handlers.

moto calls `LambdaFunction._invoke_lambda(event)` and expects `(payload, errored, logs)`. An
errored payload `{"errorType", "errorMessage", "stackTrace"}` becomes the Lambda FunctionError
whose `errorType` the Step Functions interpreter uses as the error name, exactly as the Python
Lambda runtime reports a raised exception (class name). Invoke's ClientContext reaches the
handler as `context.client_context` (local_aws.client_context), which moto drops.

Two ways to run a handler (docs/design.md §7):
- in worker processes (`RuntimeSettings.workers`, the default of a local server: `sagactl local
  up`, the test fixtures, the campaign): invocations run concurrently, each in a warm
  environment of its own (local_aws.lambda_pool), within the concurrency limits, killed and
  answered `Sandbox.Timedout` past the function's timeout;
- in this process, one at a time (`mock_aws` tests, whose state a worker could not reach, and
  `handlers_in_process()` for a test that patches handler code).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from local_aws import aws_calls
from local_aws.aws_calls import AwsCall, recording_aws_calls
from local_aws.client_context import (
    CLIENT_CONTEXT_HEADER,
    header_value,
    parse_client_context,
)
from local_aws.clock import LOCAL_CLOCK
from local_aws.invokes import Invocation, current_invocation, invocation
from local_aws.lambda_context import (
    HandlerAnswer,
    LocalClientContext,
    LocalLambdaContext,
    SimulatedCrash,
    call_handler,
    error_payload,
    handler_running,
    import_error_payload,
    load_handler,
    running_function,
    tag_handler_requests,
)
from local_aws.lambda_errors import CrashNaming, crash_naming_from_env, crash_payload
from local_aws.lambda_pool import (
    EnvironmentSpec,
    WorkerGone,
    WorkerPool,
    account_concurrency_from_env,
)
from stacks.lambda_errors import Death

logger = logging.getLogger(__name__)

__all__ = [
    "FAKE_CREDENTIALS",
    "AwsCall",
    "LocalLambdaContext",
    "RuntimeSettings",
    "SimulatedCrash",
    "configure_runtime",
    "crash_errors_named",
    "current_runtime",
    "error_payload",
    "handlers_in_process",
    "install_inprocess_lambda",
    "invoke_in_process",
    "load_handler",
    "quiet_handlers",
    "recording_aws_calls",
    "restore_runtime",
    "running_function",
]

FAKE_CREDENTIALS: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

# In this process, one invoke at a time: handlers share os.environ, module globals and stdout.
_INVOKE_LOCK = threading.Lock()
_INSTALL_LOCK = threading.Lock()
# The ClientContext of the Invoke request this thread serves (moto's invoke -> _invoke_lambda).
_CLIENT_CONTEXT: ContextVar[LocalClientContext | None] = ContextVar(
    "saga_local_client_context", default=None
)


@dataclass(frozen=True)
class RuntimeSettings:
    """What every invoke sees besides its function's own environment."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    crash_errors: CrashNaming = CrashNaming.CURRENT  # how a function that died is named
    # Worker processes (None: in this process, one at a time).
    pool: WorkerPool | None = field(default=None, compare=False)

    @property
    def workers(self) -> bool:
        return self.pool is not None


class _Runtime:
    settings = RuntimeSettings()


def configure_runtime(
    endpoint_url: str | None,
    region: str = "us-east-1",
    crash_errors: CrashNaming | None = None,
    *,
    workers: bool = False,
    concurrency: int | None = None,
) -> None:
    """Set the endpoint that handlers' boto3 clients use (the local server; None in mock_aws),
    how a function that died is named (default: $SAGA_LOCAL_CRASH_ERRORS, else current), and
    whether handlers run in worker processes (with an endpoint only: a worker reaches the local
    AWS through it), within the account's concurrency (default: $SAGA_LOCAL_LAMBDA_CONCURRENCY,
    else lambda_pool.DEFAULT_ACCOUNT_CONCURRENCY)."""
    naming = crash_errors or crash_naming_from_env()
    pool = None
    if workers and endpoint_url:
        limit = concurrency or account_concurrency_from_env()
        pool = WorkerPool(limit, LOCAL_CLOCK.shared_path)
    _Runtime.settings = RuntimeSettings(
        endpoint_url=endpoint_url, region=region, crash_errors=naming, pool=pool
    )


def current_runtime() -> RuntimeSettings:
    return _Runtime.settings


def restore_runtime(settings: RuntimeSettings) -> None:
    """Back to `settings`; the worker processes of the settings replaced are retired."""
    replaced = _Runtime.settings
    _Runtime.settings = settings
    if replaced.pool is not None and replaced.pool is not settings.pool:
        replaced.pool.stop()


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


@contextmanager
def handlers_in_process() -> Iterator[None]:
    """Run handlers in this process, one at a time, while the block runs: for a test that
    patches handler code (a worker process would not see the patch)."""
    previous = _Runtime.settings
    _Runtime.settings = dataclasses.replace(previous, pool=None)
    try:
        yield
    finally:
        _Runtime.settings = dataclasses.replace(_Runtime.settings, pool=previous.pool)


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


def _running_request() -> str | None:
    """The invocation whose handler runs in the calling thread (in-process invokes)."""
    if running_function() is None:
        return None
    current = current_invocation()
    return current.request_id if current is not None else None


@dataclass(frozen=True)
class _Function:
    """The function an invoke runs, as moto describes it."""

    handler_path: str
    function_name: str
    function_arn: str
    version: str
    memory_mb: int
    timeout: float
    variables: Mapping[str, Any]
    reserved_concurrency: int | None = None

    def context(self, request_id: str, client_context: LocalClientContext | None) -> Any:
        return LocalLambdaContext(
            function_name=self.function_name,
            function_version=self.version,
            invoked_function_arn=self.function_arn,
            memory_limit_in_mb=self.memory_mb,
            timeout_seconds=self.timeout,
            aws_request_id=request_id,
            client_context=client_context,
        )


def _answer(answer: HandlerAnswer, request_id: str, timeout: float) -> tuple[str, bool, str]:
    """moto's `(payload, errored, logs)`; a death as Lambda answers a process that ended before
    it answered."""
    if answer.died is None:
        return answer.payload, answer.errored, answer.logs
    death, detail = answer.died
    payload = crash_payload(
        death,
        _Runtime.settings.crash_errors,
        request_id=request_id,
        timeout_seconds=timeout,
        detail=detail,
    )
    return json.dumps(payload), True, payload["errorMessage"]


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
    """Run the handler for one invoke in this process; returns moto's `(payload, errored,
    logs)`."""
    function = _Function(
        handler_path, function_name, function_arn, version, memory_mb, timeout, variables
    )
    with invocation(function_name, event) as current:
        return _invoke_here(function, event, current, client_context)


def _invoke_here(
    function: _Function,
    event: Any,
    current: Invocation,
    client_context: LocalClientContext | None,
) -> tuple[str, bool, str]:
    context = function.context(current.request_id, client_context)
    env = invoke_environment(
        context, handler=function.handler_path, function_variables=function.variables
    )
    with _INVOKE_LOCK, applied_environment(env):
        try:
            handler = load_handler(function.handler_path)
        except Exception as exc:
            logger.exception("cannot import handler %s of %s", function.handler_path, context)
            payload = import_error_payload(function.handler_path, exc)
            return json.dumps(payload), True, "".join(traceback.format_exception(exc))
        with handler_running(function.function_name):
            answer = call_handler(handler, event, context)
    return _answer(answer, current.request_id, function.timeout)


def _environment_spec(function: _Function) -> EnvironmentSpec:
    context = function.context("", None)
    env = invoke_environment(
        context, handler=function.handler_path, function_variables=function.variables
    )
    return EnvironmentSpec(
        function_name=function.function_name,
        function_arn=function.function_arn,
        version=function.version,
        handler=function.handler_path,
        memory_mb=function.memory_mb,
        timeout=function.timeout,
        environment=tuple(sorted(env.items())),
    )


def _invoke_in_worker(
    pool: WorkerPool,
    function: _Function,
    event: Any,
    current: Invocation,
    client_context: LocalClientContext | None,
) -> tuple[str, bool, str]:
    """One invoke in a warm environment of its function (a new one if none is idle)."""
    spec = _environment_spec(function)
    try:
        slot = pool.limits.slot(function.function_arn, function.reserved_concurrency)
        slot.__enter__()
    except Exception:
        current.ran = False  # throttled: no handler ran
        raise
    try:
        return _run_in_worker(pool, spec, event, current, client_context)
    finally:
        slot.__exit__(None, None, None)


def _run_in_worker(
    pool: WorkerPool,
    spec: EnvironmentSpec,
    event: Any,
    current: Invocation,
    client_context: LocalClientContext | None,
) -> tuple[str, bool, str]:
    try:
        worker, init_error = pool.take(spec)
    except WorkerGone as gone:
        return _answer(_dead(False, str(gone)), current.request_id, spec.timeout)
    if init_error is not None:
        worker.stop()
        return init_error.payload, True, init_error.logs
    message = {
        "request_id": current.request_id,
        "event": event,
        "remaining_seconds": spec.timeout,
        "client_context": None if client_context is None else client_context.to_json(),
        "record": aws_calls.recording(),
    }
    try:
        answer = worker.invoke(
            message, lambda call: aws_calls.record_worker_call(spec.function_name, call)
        )
    except WorkerGone as gone:
        worker.stop(kill=True)
        answer = _dead(gone.timed_out, str(gone))
    else:
        if answer.died is None:
            pool.give_back(worker)
        else:
            worker.stop()  # it exits after answering a death
    return _answer(answer, current.request_id, spec.timeout)


def _dead(timed_out: bool, detail: str) -> HandlerAnswer:
    death = Death.TIMED_OUT if timed_out else Death.EXITED
    return HandlerAnswer("", True, detail, died=(death, f"local runtime: {detail}"))


def _reserved_concurrency(function: Any) -> int | None:
    reserved = getattr(function, "reserved_concurrency", None)
    return None if reserved is None or reserved == "" else int(reserved)


def _moto_invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """Replacement for moto.awslambda.models.LambdaFunction._invoke_lambda."""
    if event is None:
        event = {}
    elif isinstance(event, str | bytes):
        # moto passes the string "{}" for an empty body.
        event = json.loads(event) if event else {}
    function = _Function(
        handler_path=str(self.handler),
        function_name=str(self.function_name),
        function_arn=str(self.function_arn),
        version=str(self.version),
        memory_mb=int(self.memory_size),
        timeout=float(self.timeout),
        variables=dict(self.environment_vars or {}),
        reserved_concurrency=_reserved_concurrency(self),
    )
    client_context = _CLIENT_CONTEXT.get()
    pool = _Runtime.settings.pool
    with invocation(function.function_name, event) as current:
        if pool is None:
            return _invoke_here(function, event, current, client_context)
        return _invoke_in_worker(pool, function, event, current, client_context)


def _with_client_context(invoke: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `LambdaFunction.invoke(body, request_headers, response_headers)`, with the
    request's ClientContext for the handler: refused as Lambda refuses it when it is not
    base64-encoded JSON, and given to synchronous invocations only. The invocation is
    registered here, around every wrapper of `_invoke_lambda` (local_aws.invokes)."""

    @functools.wraps(invoke)
    def invoke_with_context(self: Any, body: Any, request_headers: Any, response: Any) -> Any:
        client_context = parse_client_context(header_value(request_headers, CLIENT_CONTEXT_HEADER))
        kind = header_value(request_headers, "X-Amz-Invocation-Type") or "RequestResponse"
        token = _CLIENT_CONTEXT.set(client_context if kind == "RequestResponse" else None)
        try:
            with invocation(str(self.function_name), _event_of(body)):
                return invoke(self, body, request_headers, response)
        finally:
            _CLIENT_CONTEXT.reset(token)

    invoke_with_context.saga_client_context = True  # type: ignore[attr-defined]
    return invoke_with_context


def _event_of(body: Any) -> Any:
    try:
        return json.loads(body) if body else {}
    except (TypeError, ValueError):
        return body


def install_inprocess_lambda() -> None:
    """Make moto run every Lambda invoke through this runtime (idempotent)."""
    from moto.awslambda.models import LambdaFunction

    with _INSTALL_LOCK:
        LambdaFunction._invoke_lambda = _moto_invoke_lambda  # type: ignore[method-assign]
        if not getattr(LambdaFunction.invoke, "saga_client_context", False):
            LambdaFunction.invoke = _with_client_context(  # type: ignore[method-assign]
                LambdaFunction.invoke
            )
    tag_handler_requests(_running_request)


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
