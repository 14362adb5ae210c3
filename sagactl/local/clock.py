"""The local AWS's one clock: real time plus an offset that only moves forward.

On AWS every timestamp is real time. Locally, hours and days must pass in seconds (leases, the
payment provider's 24 h key retention, DynamoDB's 10-minute token window and TTL, the 14-day
redrive window), so everything in the local AWS that reads "now" reads ONE clock, `LOCAL_CLOCK`
(one per process: the server runs the Lambda handlers in its own process):

- `saga.clock.now()` (every `now` of the Lambda code), once `install_local_clock()` ran;
- moto's Step Functions execution start/stop dates, history timestamps and `$$.State.EnteredTime`;
- DynamoDB TTL deletion (sagactl/local/ttl.py) and the ClientRequestToken window
  (sagactl/local/transaction_tokens.py);
- the Lambda worker processes, through the offset the clock shares with them (`shared_path`,
  sagactl/local/shared_clock.py): every move is seen there at once.

Only `advance` moves it, and only forward. Retry sleeps, task timeouts and Lambda deadlines stay
real (scaled) time: the clock jumps, it does not run faster. What listens to `on_advance` (TTL
deletion) runs before `advance` returns, so a test sees the consequences at once.

Another process (sagactl against a running `sagactl local up`) reads and moves the clock over
HTTP on the server's loopback port: GET /_saga/clock and POST /_saga/clock/advance
{"seconds": N} (`read_clock`, `advance_clock`; `ClockEndpoint` serves them).
"""

from __future__ import annotations

import datetime as _datetime
import importlib
import ipaddress
import json
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sagactl.local.shared_clock import SharedOffset

CLOCK_PATH = "/_saga/clock"
ADVANCE_PATH = "/_saga/clock/advance"
# A bound that keeps every timestamp a datetime can hold (moto renders them as datetimes).
MAX_ADVANCE_SECONDS = 10 * 366 * 86400
_HTTP_TIMEOUT_SECONDS = 10.0

Listener = Callable[[float], Any]
SCHEDULED_RULES_EFFECT = "scheduled_rules"  # the names of the scheduled rules an advance fired


@dataclass(frozen=True)
class ClockReading:
    """What the clock says: now (epoch seconds) and how far it is ahead of real time.

    `effects` are what the listeners did on an advance (e.g. `{"ttl_deleted": {table: n}}`).
    """

    now: float
    offset_seconds: float
    effects: dict[str, Any] = field(default_factory=dict)

    @property
    def now_utc(self) -> str:
        moment = _datetime.datetime.fromtimestamp(self.now, _datetime.UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now,
            "now_utc": self.now_utc,
            "offset_seconds": self.offset_seconds,
            "effects": self.effects,
        }

    @classmethod
    def from_json(cls, document: Any) -> ClockReading:
        if not isinstance(document, dict):
            raise ValueError(f"not a clock reading: {document!r}")
        effects = document.get("effects") or {}
        return cls(
            now=float(document["now"]),
            offset_seconds=float(document["offset_seconds"]),
            effects=dict(effects) if isinstance(effects, dict) else {},
        )


class LocalClock:
    """Real time (`source`) plus an offset that only `advance` changes, and only forward."""

    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._advance_lock = threading.Lock()
        self._listeners: dict[str, Listener] = {}
        self._shared: SharedOffset | None = None

    def now(self) -> float:
        """Epoch seconds on this clock (no lock: reading one float is atomic)."""
        return self._source() + self._offset

    @property
    def offset_seconds(self) -> float:
        return self._offset

    def shared_path(self) -> str:
        """The file other processes map to read this clock (created on first use)."""
        with self._advance_lock:
            if self._shared is None:
                self._shared = SharedOffset.create()
                self._shared.write(self._offset)
            return self._shared.path

    def _set_offset(self, offset: float) -> None:
        self._offset = offset
        if self._shared is not None:
            self._shared.write(offset)

    def reading(self) -> ClockReading:
        offset = self._offset
        return ClockReading(now=self._source() + offset, offset_seconds=offset)

    def on_advance(self, name: str, listener: Listener) -> None:
        """Call `listener(now)` after every advance (once per name: registering again replaces
        it); what it returns is reported under `name` in the reading's effects."""
        self._listeners[name] = listener

    def remove_listener(self, name: str) -> None:
        self._listeners.pop(name, None)

    def advance(self, seconds: float) -> ClockReading:
        """Move the clock forward by `seconds` (0 is allowed: listeners run, time stays), then run
        the listeners, all before returning."""
        seconds = _checked_seconds(seconds)
        with self._advance_lock:
            self._set_offset(self._offset + seconds)
            now = self.now()
            effects = {name: listener(now) for name, listener in list(self._listeners.items())}
        return ClockReading(now=now, offset_seconds=self._offset, effects=effects)

    def reset(self) -> None:
        """Back to real time: only for a fresh local account (the test fixtures' reprovision)."""
        with self._advance_lock:
            self._set_offset(0.0)


def _checked_seconds(seconds: Any) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"seconds must be a number, got {seconds!r}")
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"the local clock only moves forward: seconds must be >= 0, got {seconds}")
    if value > MAX_ADVANCE_SECONDS:
        raise ValueError(f"at most {MAX_ADVANCE_SECONDS} seconds (10 years) per advance")
    return value


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


def _is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


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
        body = json.dumps(document).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]

    def _answer(self, path: str, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if not _is_loopback(environ.get("REMOTE_ADDR")):
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
            reading = self.clock.advance(request["seconds"])
        except ValueError as exc:  # also json.JSONDecodeError
            return "400 Bad Request", {"error": str(exc)}
        return "200 OK", reading.to_json()


class ClockUnavailable(Exception):
    """The local AWS at an endpoint did not answer its clock endpoint (not running, or not a
    `sagactl local up`)."""


def _call(url: str, data: bytes | None = None) -> ClockReading:
    host = urllib.parse.urlsplit(url).hostname
    if host != "localhost" and not _is_loopback(host):
        raise ClockUnavailable(f"{url}: the local AWS's clock is on a loopback address only")
    # No proxies: the local AWS is on loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 by construction)
        url, data=data, method="POST" if data is not None else "GET"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with opener.open(request, timeout=_HTTP_TIMEOUT_SECONDS) as response:
            return ClockReading.from_json(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except (ValueError, AttributeError):
            message = exc.reason
        if exc.code == 400:
            raise ValueError(str(message)) from None
        raise ClockUnavailable(f"{url}: HTTP {exc.code} {message}") from None
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise ClockUnavailable(f"{url}: {getattr(exc, 'reason', exc)}") from None


def read_clock(endpoint: str) -> ClockReading:
    """The clock of the local AWS at `endpoint` (e.g. http://127.0.0.1:4566)."""
    return _call(endpoint.rstrip("/") + CLOCK_PATH)


def advance_clock(endpoint: str, seconds: float) -> ClockReading:
    """Move the clock of the local AWS at `endpoint` forward; ValueError if it refuses `seconds`."""
    _checked_seconds(seconds)
    body = json.dumps({"seconds": seconds}).encode()
    return _call(endpoint.rstrip("/") + ADVANCE_PATH, data=body)
