"""Lambda execution environments of the local AWS: worker processes, warm and reused, and the
concurrency limits that answer TooManyRequestsException past them (docs/design.md §7).

An environment is one function configuration (`EnvironmentSpec`: name, ARN, version, handler,
memory, timeout, environment variables): a change of any of them gets new environments, as on
Lambda. An invocation takes an idle environment of its configuration or starts one (its init:
the handler's import), runs in it alone, and gives it back; so invocations run concurrently,
each in its own process, and a sequence of invocations reuses one warm process, as Lambda
reuses a container. An environment whose invocation died (a crash, its timeout) is not reused.

Concurrency (the number of invocations in flight) is limited as Lambda limits it: a function
with reserved concurrency (PutFunctionConcurrency) gets at most that many (0: every invoke is
throttled), the others share what the account limit leaves. Past a limit, Invoke answers HTTP
429 TooManyRequestsException, which a Step Functions task reports as
`Lambda.TooManyRequestsException`. The account limit is 1,000 on AWS by default; locally each
concurrent invocation is a process, so it defaults to `DEFAULT_ACCOUNT_CONCURRENCY`
(`sagactl local up --lambda-concurrency N`, or $SAGA_LOCAL_LAMBDA_CONCURRENCY).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import IO, Any

from moto.awslambda.exceptions import LambdaClientError

from local_aws.lambda_context import HandlerAnswer, from_wire
from local_aws.lambda_worker import END_OF_OUTPUT

logger = logging.getLogger(__name__)

CONCURRENCY_ENV = "SAGA_LOCAL_LAMBDA_CONCURRENCY"
DEFAULT_ACCOUNT_CONCURRENCY = 10
INIT_TIMEOUT_SECONDS = 60.0  # a cold start on a loaded laptop, far above a real one
MAX_IDLE_ENVIRONMENTS = 32  # warm processes kept; the least recently used go first
_OUTPUT_GRACE_SECONDS = 5.0
# What a worker inherits from the server besides its function's environment.
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
_SANDBOX_ENVIRONMENT = {
    "AWS_CONFIG_FILE": os.devnull,  # never a profile of the machine's user
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
    "TZ": "UTC",
}


class TooManyRequests(LambdaClientError):
    """Invoke's 429 past a concurrency limit (Lambda API reference, Invoke, Errors)."""

    code = 429

    def __init__(self, reason: str) -> None:
        super().__init__("TooManyRequestsException", "Rate Exceeded.")
        self.description = json.dumps(
            {"Reason": reason, "Type": "User", "message": "Rate Exceeded."}
        )


def account_concurrency_from_env() -> int:
    raw = os.environ.get(CONCURRENCY_ENV) or str(DEFAULT_ACCOUNT_CONCURRENCY)
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ValueError(f"{CONCURRENCY_ENV} must be a whole number >= 1, got {raw!r}")
    return limit


@dataclass(frozen=True)
class EnvironmentSpec:
    """One function configuration: what makes two execution environments interchangeable."""

    function_name: str
    function_arn: str
    version: str
    handler: str
    memory_mb: int
    timeout: float
    environment: tuple[tuple[str, str], ...]

    def function(self) -> dict[str, Any]:
        return {
            "function_name": self.function_name,
            "function_arn": self.function_arn,
            "version": self.version,
            "memory_mb": self.memory_mb,
        }


class WorkerGone(Exception):
    """The worker process ended, or stopped answering within its time."""

    def __init__(self, timed_out: bool, detail: str) -> None:
        super().__init__(detail)
        self.timed_out = timed_out


class Worker:
    """One execution environment: a `local_aws.lambda_worker` process."""

    def __init__(self, spec: EnvironmentSpec, clock_path: str) -> None:
        self.spec = spec
        ours, theirs = socket.socketpair()
        environment = {k: os.environ[k] for k in _INHERITED if k in os.environ}
        environment.update(_SANDBOX_ENVIRONMENT)
        environment.update(dict(spec.environment))
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "local_aws.lambda_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        self.channel = Connection(ours.detach())
        self._output_done = threading.Event()
        stdout: IO[bytes] = self.process.stdout  # type: ignore[assignment]
        threading.Thread(
            target=self._forward_output, args=(stdout,), name="lambda-output", daemon=True
        ).start()
        self._send({"init": {"sys_path": sys.path, "handler": spec.handler,
                             "function": spec.function(), "clock": clock_path}})  # fmt: skip
        self.last_used = time.monotonic()

    def _forward_output(self, stdout: IO[bytes]) -> None:
        """The process's output to the handler log (this process's stdout, as it is now)."""
        for raw in iter(stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if line.rstrip("\n") == END_OF_OUTPUT:
                self._output_done.set()
            elif line != "\n":
                with contextlib.suppress(ValueError):  # a sink closed by its owner meanwhile
                    sys.stdout.write(line)
        self._output_done.set()

    def _send(self, document: Mapping[str, Any]) -> None:
        self.channel.send_bytes(json.dumps(document).encode("utf-8"))

    def _receive(self, deadline: float) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0 or not self.channel.poll(remaining):
                raise WorkerGone(True, "no answer in time")
            document: dict[str, Any] = json.loads(self.channel.recv_bytes())
        except (EOFError, OSError) as exc:
            raise WorkerGone(False, self._exit_detail()) from exc
        return document

    def _exit_detail(self) -> str:
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the worker stopped answering"
        return f"signal: {-code}" if code < 0 else f"exit status {code}"

    def _wait_for_output(self) -> None:
        self._output_done.wait(_OUTPUT_GRACE_SECONDS)
        self._output_done.clear()

    def ready(self) -> HandlerAnswer | None:
        """Wait for the init; None when the handler is ready, else the error to answer."""
        answer = self._receive(time.monotonic() + INIT_TIMEOUT_SECONDS)
        self._wait_for_output()
        if "init_error" in answer:
            return HandlerAnswer.from_json(answer["init_error"])
        return None

    def invoke(
        self, invoke: Mapping[str, Any], on_call: Callable[[dict[str, Any]], None]
    ) -> HandlerAnswer:
        """One invocation, within the function's timeout (WorkerGone past it, or on a death)."""
        deadline = time.monotonic() + float(invoke["remaining_seconds"])
        self._send({"invoke": invoke})
        while True:
            message = self._receive(deadline)
            if "call" in message:
                on_call(from_wire(message["call"]))
                continue
            self._wait_for_output()
            self.last_used = time.monotonic()
            return HandlerAnswer.from_json(message["answer"])

    def stop(self, *, kill: bool = False) -> None:
        with contextlib.suppress(OSError):
            self.channel.close()
        if kill:
            with contextlib.suppress(OSError):
                self.process.kill()
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ConcurrencyLimits:
    """Invocations in flight, per function and in the account, against their limits."""

    def __init__(self, account_limit: int) -> None:
        self.account_limit = account_limit
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        self._reserved: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, function_arn: str, reserved: int | None) -> Iterator[None]:
        """Hold one unit of concurrency while the block runs; TooManyRequests when none is left."""
        with self._lock:
            self._reserve(function_arn, reserved)
            running = self._in_flight.get(function_arn, 0)
            if reserved is not None and running >= reserved:
                raise TooManyRequests("ReservedFunctionConcurrentInvocationLimitExceeded")
            if reserved is None and self._unreserved_in_flight() >= self._unreserved():
                raise TooManyRequests("ConcurrentInvocationLimitExceeded")
            self._in_flight[function_arn] = running + 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[function_arn] -= 1

    def _reserve(self, function_arn: str, reserved: int | None) -> None:
        if reserved is None:
            self._reserved.pop(function_arn, None)
        else:
            self._reserved[function_arn] = reserved

    def _unreserved(self) -> int:
        return self.account_limit - sum(self._reserved.values())

    def _unreserved_in_flight(self) -> int:
        return sum(n for arn, n in self._in_flight.items() if arn not in self._reserved)

    def in_flight(self) -> int:
        with self._lock:
            return sum(self._in_flight.values())


class WorkerPool:
    """The warm environments of every function configuration, and the concurrency limits."""

    def __init__(self, account_limit: int, clock_path: Callable[[], str]) -> None:
        self.limits = ConcurrencyLimits(account_limit)
        self._clock_path = clock_path
        self._lock = threading.Lock()
        self._idle: dict[EnvironmentSpec, list[Worker]] = {}
        self.started = 0  # environments started (cold starts), for tests and the campaign

    def take(self, spec: EnvironmentSpec) -> tuple[Worker, HandlerAnswer | None]:
        """A warm environment of `spec`, else a new one (and its init error, if any)."""
        with self._lock:
            idle = self._idle.get(spec, [])
            while idle:
                worker = idle.pop()
                if worker.process.poll() is None:
                    return worker, None
                worker.stop()
            self.started += 1
        worker = Worker(spec, self._clock_path())
        try:
            return worker, worker.ready()
        except WorkerGone as gone:
            worker.stop(kill=True)
            raise WorkerGone(gone.timed_out, f"init: {gone}") from None

    def give_back(self, worker: Worker) -> None:
        with self._lock:
            self._idle.setdefault(worker.spec, []).append(worker)
            evicted = self._evict()
        for old in evicted:
            old.stop()

    def _evict(self) -> list[Worker]:
        idle = [worker for workers in self._idle.values() for worker in workers]
        if len(idle) <= MAX_IDLE_ENVIRONMENTS:
            return []
        idle.sort(key=lambda worker: worker.last_used)
        evicted = idle[: len(idle) - MAX_IDLE_ENVIRONMENTS]
        for worker in evicted:
            self._idle[worker.spec].remove(worker)
        return evicted

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(workers) for workers in self._idle.values())

    def stop(self) -> None:
        """Retire every idle environment (those in use end with their invocation)."""
        with self._lock:
            idle = [worker for workers in self._idle.values() for worker in workers]
            self._idle.clear()
        for worker in idle:
            worker.stop()
