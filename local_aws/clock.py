"""The local AWS's one clock: real time plus an offset that only moves forward.

On AWS every timestamp is real time. Locally, hours and days must pass in seconds (leases, the
payment provider's 24 h key retention, DynamoDB's 10-minute token window and TTL, the 14-day
redrive window), so everything in the local AWS that reads "now" reads ONE clock, `LOCAL_CLOCK`
(one per process: the server runs the Lambda handlers in its own process):

- `saga.clock.now()` (every `now` of the Lambda code), once `install_local_clock()` ran;
- moto's Step Functions execution start/stop dates, history timestamps and `$$.State.EnteredTime`;
- DynamoDB TTL deletion (local_aws/ttl.py) and the ClientRequestToken window
  (local_aws/transaction_tokens.py);
- the Lambda worker processes, through the offset the clock shares with them (`shared_path`,
  local_aws/shared_clock.py): every move is seen there at once.

Only `advance` moves it, and only forward. Retry sleeps, task timeouts and Lambda deadlines stay
real (scaled) time: the clock jumps, it does not run faster. What listens to `on_advance` (TTL
deletion, the scheduled rules) runs before `advance` returns, so a test sees the consequences at
once. A listener may take long (a scheduled rule invokes the sweeper, which may need a new
worker process, and the worker reads the clock's shared offset: so that file has its own lock,
never the advance's, or the first advance that fires the sweeper would wait for itself).

Another process (sagactl against a running `sagactl local up`) reads and moves the clock over
HTTP on the server's loopback port: GET /_saga/clock and POST /_saga/clock/advance
{"seconds": N} (`read_clock`, `advance_clock`: sagactl.clock_client; `ClockEndpoint` serves
them). An advance answers
JSON lines as it goes: `{"moved": reading}` as soon as the clock jumped, `{"running": what,
"elapsed_seconds": s}` at least every HEARTBEAT_SECONDS while the listeners run, then `{"done":
reading}` (with their effects) or `{"failed": text}`. So the client waits as long as the work
takes, says what it is, and knows that the jump happened whatever comes after it.
"""

from __future__ import annotations

import datetime as _datetime
import importlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from local_aws.shared_clock import SharedOffset

# Still importable from here, where they were: the protocol and its client are
# sagactl.clock_client's (an operator command reads the local AWS's clock).
from sagactl.clock_client import (  # noqa: F401
    ADVANCE_PATH,
    CLOCK_PATH,
    MAX_ADVANCE_SECONDS,
    SCHEDULED_RULES_EFFECT,
    AdvanceUnfinished,
    ClockReading,
    ClockUnavailable,
    advance_clock,
    checked_seconds,
    is_loopback,
    read_clock,
)

HEARTBEAT_SECONDS = 1.0

Listener = Callable[[float], Any]
# What an advance reports while it works: ("moved", ClockReading), then ("running", listener name)
# before each listener.
Progress = Callable[[str, Any], None]


class LocalClock:
    """Real time (`source`) plus an offset that only `advance` changes, and only forward."""

    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._advance_lock = threading.Lock()
        self._shared_lock = threading.Lock()  # the shared file only: never held across listeners
        self._listeners: dict[str, Listener] = {}
        self._doing: dict[str, str | Callable[[], str]] = {}
        self._shared: SharedOffset | None = None

    def now(self) -> float:
        """Epoch seconds on this clock (no lock: reading one float is atomic)."""
        return self._source() + self._offset

    @property
    def offset_seconds(self) -> float:
        return self._offset

    def shared_path(self) -> str:
        """The file other processes map to read this clock (created on first use). Callable
        while an advance runs its listeners: a worker started for one of them asks for it."""
        with self._shared_lock:
            if self._shared is None:
                self._shared = SharedOffset.create()
                self._shared.write(self._offset)
            return self._shared.path

    def _set_offset(self, offset: float) -> None:
        self._offset = offset
        with self._shared_lock:  # whoever writes last writes the newest offset
            if self._shared is not None:
                self._shared.write(self._offset)

    def reading(self) -> ClockReading:
        offset = self._offset
        return ClockReading(now=self._source() + offset, offset_seconds=offset)

    def on_advance(
        self, name: str, listener: Listener, doing: str | Callable[[], str] | None = None
    ) -> None:
        """Call `listener(now)` after every advance (once per name: registering again replaces
        it); what it returns is reported under `name` in the reading's effects. `doing` says
        what it does while it runs (a text, or a function that says it at that moment)."""
        self._listeners[name] = listener
        self._doing[name] = doing or f"running {name}"

    def remove_listener(self, name: str) -> None:
        self._listeners.pop(name, None)
        self._doing.pop(name, None)

    def doing(self, name: str) -> str:
        """What listener `name` does, as it says it now."""
        doing = self._doing.get(name, f"running {name}")
        return doing if isinstance(doing, str) else doing()

    def advance(self, seconds: float, progress: Progress | None = None) -> ClockReading:
        """Move the clock forward by `seconds` (0 is allowed: listeners run, time stays), then run
        the listeners, all before returning. `progress` hears the jump, then each listener as
        it starts."""
        seconds = checked_seconds(seconds)
        tell = progress or (lambda _kind, _value: None)
        with self._advance_lock:
            self._set_offset(self._offset + seconds)
            now = self.now()
            tell("moved", ClockReading(now=now, offset_seconds=self._offset))
            effects = {}
            for name, listener in list(self._listeners.items()):
                tell("running", name)
                effects[name] = listener(now)
        return ClockReading(now=now, offset_seconds=self._offset, effects=effects)

    def reset(self) -> None:
        """Back to real time: only for a fresh local account (the test fixtures' reprovision)."""
        with self._advance_lock:
            self._set_offset(0.0)


LOCAL_CLOCK = LocalClock()


def now() -> float:
    """The local AWS's now in this process (what `saga.clock.now()` returns once installed)."""
    return LOCAL_CLOCK.now()


# -- the clock as the time source of the Lambda code and of moto -------------------------------


class _ClockedDatetimeType:
    """Stands in for `datetime.datetime` in moto's Step Functions modules: `now()` reads the local
    clock and returns a real datetime; every other attribute is the real class's."""

    def __init__(self, clock: LocalClock) -> None:
        self._clock = clock

    def now(self, tz: _datetime.tzinfo | None = None) -> _datetime.datetime:
        return _datetime.datetime.fromtimestamp(self._clock.now(), tz)

    def __getattr__(self, name: str) -> Any:
        return getattr(_datetime.datetime, name)


class _ClockedDatetimeModule:
    """Stands in for the `datetime` module (`datetime.datetime.now(tz=datetime.timezone.utc)`)."""

    def __init__(self, clock: LocalClock) -> None:
        self.datetime = _ClockedDatetimeType(clock)

    def __getattr__(self, name: str) -> Any:
        return getattr(_datetime, name)


# Where moto's Step Functions executor takes "now" with `datetime.datetime.now(...)`.
_STEP_FUNCTIONS_DATETIME_USERS = (
    "moto.stepfunctions.parser.models",  # StartExecution: startDate
    "moto.stepfunctions.parser.backend.execution",  # the end of an execution: stopDate
    "moto.stepfunctions.parser.asl.eval.event.event_manager",  # history event timestamps
    "moto.stepfunctions.parser.asl.component.state.state",  # $$.State.EnteredTime
)
# Where it takes "now" with moto's `utcnow()` (StopExecution, state machine dates).
_STEP_FUNCTIONS_UTCNOW_USERS = ("moto.stepfunctions.models",)


def install_local_clock(clock: LocalClock = LOCAL_CLOCK) -> None:
    """Make `clock` the time of this process's local AWS (idempotent): `saga.clock` and moto's
    Step Functions timestamps read it. Sleeps and timeouts keep real time."""
    from saga import clock as saga_clock

    saga_clock.use(clock.now)
    clocked = _ClockedDatetimeModule(clock)
    for name in _STEP_FUNCTIONS_DATETIME_USERS:
        importlib.import_module(name).datetime = clocked  # type: ignore[attr-defined]

    def utcnow() -> _datetime.datetime:
        # moto's utcnow(): naive UTC
        return _datetime.datetime.fromtimestamp(clock.now(), _datetime.UTC).replace(tzinfo=None)

    for name in _STEP_FUNCTIONS_UTCNOW_USERS:
        importlib.import_module(name).utcnow = utcnow  # type: ignore[attr-defined]


# -- the clock over HTTP (served by the local AWS, read by other processes) --------------------


class ClockEndpoint:
    """WSGI middleware in front of the moto server: GET /_saga/clock, POST /_saga/clock/advance.

    Loopback clients only (the server listens on loopback anyway). Everything else goes to `app`.
    """

    def __init__(self, app: Any, clock: LocalClock = LOCAL_CLOCK) -> None:
        self.app = app
        self.clock = clock

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in (CLOCK_PATH, ADVANCE_PATH):
            result: Iterable[bytes] = self.app(environ, start_response)
            return result
        status, document = self._answer(path, environ)
        if not isinstance(document, dict):  # an advance under way: JSON lines as they come
            start_response(status, [("Content-Type", "application/x-ndjson")])
            return document
        body = json.dumps(document).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]

    def _answer(
        self, path: str, environ: dict[str, Any]
    ) -> tuple[str, dict[str, Any] | Iterator[bytes]]:
        if not is_loopback(environ.get("REMOTE_ADDR")):
            return "403 Forbidden", {"error": "the local clock answers loopback clients only"}
        method = environ.get("REQUEST_METHOD", "GET")
        if path == CLOCK_PATH:
            if method != "GET":
                return "405 Method Not Allowed", {"error": f"use GET {CLOCK_PATH}"}
            return "200 OK", self.clock.reading().to_json()
        if method != "POST":
            return "405 Method Not Allowed", {"error": f'use POST {ADVANCE_PATH} {{"seconds": N}}'}
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            request = json.loads(environ["wsgi.input"].read(length) or b"null")
            if not isinstance(request, dict) or "seconds" not in request:
                raise ValueError('expected a JSON object {"seconds": N}')
            seconds = checked_seconds(request["seconds"])
        except ValueError as exc:  # also json.JSONDecodeError
            return "400 Bad Request", {"error": str(exc)}
        return "200 OK", self._advancing(seconds)

    def _advancing(self, seconds: float) -> Iterator[bytes]:
        """The advance, run on a thread of its own, as JSON lines: the jump, what runs after it
        (at least every HEARTBEAT_SECONDS), the end."""
        events: queue.Queue[tuple[str, Any]] = queue.Queue()

        def run() -> None:
            try:
                reading = self.clock.advance(seconds, lambda kind, value: events.put((kind, value)))
            except Exception as exc:  # a listener failed: said on the stream, not a 500
                events.put(("failed", f"{type(exc).__name__}: {exc}"))
            else:
                events.put(("done", reading))

        threading.Thread(target=run, name="saga-clock-advance", daemon=True).start()
        started = time.monotonic()
        doing = "waiting for an advance under way to finish"
        listener: str | None = None  # the one running: asked what it does at each heartbeat

        def line(document: dict[str, Any]) -> bytes:
            return json.dumps(document).encode() + b"\n"

        while True:
            try:
                kind, value = events.get(timeout=HEARTBEAT_SECONDS)
            except queue.Empty:
                kind, value = "still", None
            elapsed = round(time.monotonic() - started, 1)
            if kind == "moved":
                doing = "the clock moved"
                yield line({"moved": value.to_json()})
            elif kind in ("running", "still"):
                listener = value if kind == "running" else listener
                doing = self.clock.doing(listener) if listener is not None else doing
                yield line({"running": doing, "elapsed_seconds": elapsed})
            elif kind == "done":
                yield line({"done": value.to_json()})
                return
            else:
                yield line({"failed": value})
                return
