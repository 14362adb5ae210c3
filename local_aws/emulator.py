"""The local AWS: a moto server on loopback with the hooks this project needs.

Hooks (each idempotent, each usable alone, e.g. in in-process `mock_aws` tests):
- `enable_step_functions_execution()`: moto runs the real ASL (its LocalStack-derived executor);
- `install_jsonata_evaluator()`: JSONata via jsonata-python;
- `install_inprocess_lambda()`: Lambda invokes run the project's handlers: in worker processes,
  concurrently, in a local server; in this process, one at a time, in `mock_aws`
  (local_aws.lambda_runtime);
- `install_dynamodb_atomicity()`: one lock around each DynamoDB request, as DynamoDB makes each
  single-item write (and each transaction) atomic; moto does not serialise concurrent requests;
- `set_retry_time_scale()`: ASL Retry intervals really sleep; tests may scale them down;
- `install_definition_validation()`: Create/UpdateStateMachine refuse a definition whose JSONata
  the reference parser (jsonata-js) rejects, as AWS does; ValidateStateMachineDefinition answers;
- `install_choice_state_assign()`: a Choice state's own Assign applies whatever rule matches;
- `install_lambda_unknown_mapping()`: an answer without an error type is Lambda.Unknown, as on
  AWS (a function that died answers its own error type unless the server is started with
  `crash_errors=CrashNaming.LAMBDA_UNKNOWN`: local_aws.lambda_errors);
- `install_local_clock()`: one movable clock (local_aws/clock.py) for the Lambda code and
  moto's Step Functions timestamps;
- `install_ttl_deletion()`: TTL-expired items are deleted when the clock is advanced
  (`delete_expired_items_now()` sweeps on demand);
- `install_transaction_tokens()`: DynamoDB's ClientRequestToken contract for TransactWriteItems.
- `install_dynamodb_validation()`: DynamoDB's request validation for the operations the code
  uses (unused expression values and names, keys, enums...: local_aws.dynamodb_validation);
- `install_execution_name_validation()`: StartExecution refuses names Step Functions refuses;
- `install_redrive()`: RedriveExecution, as Step Functions does it (local_aws.redrive);
- `install_execution_events()`: execution status changes reach the stack's EventBridge rules
  (local_aws.event_rules). Scheduled rules fire only in a server started with
  `run_schedules=True` (local_aws.schedules).
- `install_get_public_key_arn()`: GetPublicKey answers the key's ARN, as KMS does;
- `install_speedups()`: moto's per-request module listing and per-execution definition parse,
  done once (local_aws.speedups).
- `install_task_timeouts()`: a Task's timeout can be fired on demand (`time_out_task`: a
  delivery that hangs past it, without waiting for it: local_aws.task_timeouts).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from local_aws.approval_keys import install_get_public_key_arn
from local_aws.choice_assign import install_choice_state_assign
from local_aws.clock import (
    LOCAL_CLOCK,
    ClockEndpoint,
    LocalClock,
    install_local_clock,
)
from local_aws.definition_validation import install_definition_validation
from local_aws.dynamodb_validation import install_dynamodb_validation
from local_aws.event_rules import install_execution_events
from local_aws.invokes import HandlerRequests
from local_aws.jsonata_eval import install_jsonata_evaluator
from local_aws.lambda_errors import CrashNaming, install_lambda_unknown_mapping
from local_aws.lambda_runtime import (
    FAKE_CREDENTIALS,
    RuntimeSettings,
    configure_runtime,
    current_runtime,
    install_inprocess_lambda,
    restore_runtime,
)
from local_aws.loopback import DEFAULT_HOST, require_loopback
from local_aws.patching import wrap_once
from local_aws.redrive import install_redrive
from local_aws.schedules import RuleScheduler
from local_aws.server_errors import ServerErrors
from local_aws.speedups import install_speedups
from local_aws.task_timeouts import install_task_timeouts
from local_aws.transaction_tokens import install_transaction_tokens
from local_aws.ttl import delete_expired_items
from sagactl.clock_client import SCHEDULED_RULES_EFFECT

logger = logging.getLogger(__name__)

DEFAULT_PORT = 4566
DEFAULT_REGION = "us-east-1"
LOCAL_ACCOUNT_ID = "123456789012"  # moto's default account
TIME_SCALE_ENV = "SAGA_LOCAL_TIME_SCALE"

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_REGION",
    "LOCAL_ACCOUNT_ID",
    "LocalServer",
    "client_environment",
    "delete_expired_items_now",
    "enable_step_functions_execution",
    "install_dynamodb_atomicity",
    "install_dynamodb_validation",
    "install_hooks",
    "install_inprocess_lambda",
    "install_jsonata_evaluator",
    "install_local_clock",
    "install_transaction_tokens",
    "install_ttl_deletion",
    "retry_time_scale",
    "set_retry_time_scale",
]

_DYNAMODB_REQUEST_LOCK = threading.RLock()
_ATOMICITY_MARK = "_saga_atomic_request"


def install_dynamodb_atomicity() -> None:
    """Serialise moto's DynamoDB request handling: each request becomes atomic (idempotent).

    Wraps `DynamoHandler.call_action`, which handles one whole API call (one PutItem, one
    TransactWriteItems...) in both server mode and in-process `mock_aws`.
    """
    from moto.dynamodb.responses import DynamoHandler

    def wrap(original: Any) -> Any:
        def atomic_call_action(self: Any) -> Any:
            with _DYNAMODB_REQUEST_LOCK:
                return original(self)

        return atomic_call_action

    wrap_once(DynamoHandler, "call_action", _ATOMICITY_MARK, wrap)


def delete_expired_items_now() -> dict[str, int]:
    """TTL deletion at the local clock's now, atomic like any DynamoDB request."""
    with _DYNAMODB_REQUEST_LOCK:
        return delete_expired_items(LOCAL_CLOCK.now())


def sweep_ttl_until(
    stop: threading.Event,
    interval: float,
    on_deleted: Callable[[dict[str, int]], None] = lambda _deleted: None,
) -> None:
    """Delete TTL-expired items every `interval` seconds (0: only when the clock is advanced),
    as DynamoDB does some time after expiry, until `stop` is set."""
    if interval <= 0:
        stop.wait()
        return
    while not stop.wait(interval):
        deleted = delete_expired_items_now()
        if deleted:
            on_deleted(deleted)


def install_ttl_deletion() -> None:
    """Every advance of the local clock deletes what has expired, before the advance returns."""
    LOCAL_CLOCK.on_advance(
        "ttl_deleted",
        lambda _now: delete_expired_items_now(),
        doing="deleting the DynamoDB items whose TTL has passed",
    )


_NAME_CHECK_MARK = "_saga_checks_execution_names"


def install_execution_name_validation() -> None:
    """StartExecution refuses a name Step Functions refuses (over 80 characters: a
    ValidationException; whitespace, brackets, wildcards, `"#%\\^|~`$&,;:/`, control
    characters: InvalidName). moto checks them in its plain backend; the executing backend the
    local AWS uses skips the check."""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def wrap(original: Any) -> Any:
        def start_execution(
            self: Any, state_machine_arn: str, name: Any = None, *a: Any, **kw: Any
        ) -> Any:
            if name is not None:
                self._validate_name(name)
            return original(self, state_machine_arn, name, *a, **kw)

        return start_execution

    wrap_once(StepFunctionsParserBackend, "start_execution", _NAME_CHECK_MARK, wrap)


def enable_step_functions_execution() -> None:
    """Same effect as moto's `{"stepfunctions": {"execute_state_machine": True}}` config."""
    from moto.core.config import default_user_config

    default_user_config["stepfunctions"] = {"execute_state_machine": True}


class _ScaledRetryClock:
    """Stands in for the `time` module inside moto's Retry implementation."""

    def __init__(self) -> None:
        self.scale = 1.0

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds * self.scale))

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


_retry_clock = _ScaledRetryClock()


def time_scale_from_env() -> float:
    raw = os.environ.get(TIME_SCALE_ENV, "1")
    try:
        scale = float(raw)
    except ValueError as exc:
        raise ValueError(f"{TIME_SCALE_ENV} must be a number >= 0, got {raw!r}") from exc
    if scale < 0:
        raise ValueError(f"{TIME_SCALE_ENV} must be a number >= 0, got {raw!r}")
    return scale


def set_retry_time_scale(scale: float | None = None) -> None:
    """Scale the sleeps between ASL Retry attempts (1 = real time, 0 = no sleep).

    Default: env SAGA_LOCAL_TIME_SCALE, else 1. Task timeouts and Wait states are not scaled.
    """
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    if scale is None:
        scale = time_scale_from_env()
    if scale < 0:
        raise ValueError(f"retry time scale must be >= 0, got {scale}")
    _retry_clock.scale = scale
    retrier_decl.time = _retry_clock  # type: ignore[attr-defined,assignment]


def retry_time_scale() -> float:
    return _retry_clock.scale


def install_hooks(*, time_scale: float | None = None) -> None:
    """Everything the local AWS needs, installed into this process's moto (idempotent)."""
    enable_step_functions_execution()
    install_jsonata_evaluator()
    install_inprocess_lambda()
    install_dynamodb_atomicity()
    set_retry_time_scale(time_scale)
    install_definition_validation()
    install_choice_state_assign()
    install_lambda_unknown_mapping()
    install_local_clock()
    install_ttl_deletion()
    install_transaction_tokens()
    install_dynamodb_validation()  # after the token contract: a refused request binds no token
    install_redrive()
    install_execution_events()  # after install_redrive: the events carry its stopDate
    install_execution_name_validation()
    install_get_public_key_arn()
    install_speedups()
    install_task_timeouts()


def client_environment(endpoint: str, region: str = DEFAULT_REGION) -> dict[str, str]:
    """The environment a client (boto3, the AWS CLI) needs to use the local AWS."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
    }


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: a free one); OSError when it cannot be had."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        # As werkzeug binds: a port in TIME_WAIT can be reused, one that is listened on cannot.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    return listener


class LocalServer:
    """moto's server (its WSGI app, threaded) on loopback with the hooks installed.

    port=0 picks a free port. The server shares this process's moto backends, so in-process
    `mock_aws` resets also clear it: call `reset()` and re-provision after such use.
    `run_schedules` fires the scheduled EventBridge rules (off by default: a test's queue
    should hold only what the test caused). `crash_errors` names a function that died (default:
    $SAGA_LOCAL_CRASH_ERRORS, else current names: local_aws.lambda_errors). Handlers run in
    worker processes, concurrently, within `lambda_concurrency` invocations in flight (default:
    $SAGA_LOCAL_LAMBDA_CONCURRENCY, else 10: local_aws.lambda_pool); `lambda_workers=False`
    runs them in this process, one at a time.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        region: str = DEFAULT_REGION,
        time_scale: float | None = None,
        run_schedules: bool = False,
        crash_errors: CrashNaming | None = None,
        lambda_workers: bool = True,
        lambda_concurrency: int | None = None,
    ) -> None:
        require_loopback(host, "the local AWS")
        self.host = host
        self.requested_port = port
        self.region = region
        self.time_scale = time_scale
        self.crash_errors = crash_errors
        self.lambda_workers = lambda_workers
        self.lambda_concurrency = lambda_concurrency
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        self._previous: tuple[str | None, RuntimeSettings] | None = None
        self.scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, region) if run_schedules else None

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the local server is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        """Bind, then serve. moto's ThreadedMotoServer binds in its server thread: on a busy port
        werkzeug prints "Address already in use" and ends that thread while `start()` waits for
        it forever, deaf to Ctrl-C. Here the bind happens first, in the caller's thread, so a
        port that cannot be had is an OSError at once, and nothing is left to fail in the thread
        but serving."""
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        listener = _listen(self.host, self.requested_port)
        try:
            install_hooks(time_scale=self.time_scale)
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
            wsgi = make_server(
                self.host,
                listener.getsockname()[1],
                DomainDispatcherApplication(create_backend_app),
                threaded=True,
                request_handler=MotoRequestHandler,
                fd=listener.fileno(),
            )
        finally:
            listener.close()  # werkzeug serves on its own duplicate of the socket
        # GET /_saga/clock, POST /_saga/clock/advance in front of moto's routing, the hooks on
        # handlers' requests, and the traceback of a request that failed with a 500 kept
        # (nobody knows the port yet, so no request has been served).
        wsgi.app = ServerErrors(ClockEndpoint(HandlerRequests(wsgi.app)))
        self._server = wsgi
        self._thread = threading.Thread(target=wsgi.serve_forever, name="local-aws", daemon=True)
        self._thread.start()
        self.port = int(wsgi.server_address[1])
        # Restored on stop, so that an inner server does not leave an outer one unreachable.
        self._previous = (os.environ.get("MOTO_PORT"), current_runtime())
        # The Step Functions executor's boto clients reach Lambda on localhost:$MOTO_PORT.
        os.environ["MOTO_PORT"] = str(self.port)
        configure_runtime(
            self.endpoint,
            self.region,
            self.crash_errors,
            workers=self.lambda_workers,
            concurrency=self.lambda_concurrency,
        )
        if self.scheduler is not None:
            self.start_schedules(self.scheduler)
        logger.info("local AWS listening on %s", self.endpoint)
        return self.endpoint

    @property
    def clock(self) -> LocalClock:
        """The clock of this local AWS (one per process: `LOCAL_CLOCK`)."""
        return LOCAL_CLOCK

    def reset(self) -> None:
        """Drop every resource and execution of every service, and go back to real time."""
        from moto.moto_api._internal.models import moto_api_backend

        # The server runs in this process: the same as POST /moto-api/reset.
        moto_api_backend.reset()
        LOCAL_CLOCK.reset()

    def retire_lambda_environments(self) -> None:
        """Retire every warm Lambda environment: the next invocation of each function starts a
        new one (a cold start, as after a deployment)."""
        pool = current_runtime().pool
        if pool is not None:
            pool.stop()

    def start_schedules(self, scheduler: RuleScheduler) -> None:
        """Fire the scheduled rules: on `scheduler`'s thread as time passes, and at once for
        each rule whose period an advance of the clock passed (its listener)."""
        self.scheduler = scheduler
        scheduler.start()
        LOCAL_CLOCK.on_advance(
            SCHEDULED_RULES_EFFECT, scheduler.on_clock_advance, doing=scheduler.doing
        )

    def stop_schedules(self) -> None:
        if self.scheduler is not None:
            LOCAL_CLOCK.remove_listener(SCHEDULED_RULES_EFFECT)
            self.scheduler.stop()

    def stop(self) -> None:
        self.stop_schedules()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._previous is not None:
            moto_port, runtime = self._previous
            if moto_port is None:
                os.environ.pop("MOTO_PORT", None)
            else:
                os.environ["MOTO_PORT"] = moto_port
            restore_runtime(runtime)
            self._previous = None
        self.port = None

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
