"""The local AWS's clock as a client reads and moves it: over HTTP, on the server's loopback
port (`sagactl local advance|clock`, and every operator command's "now" against the local AWS:
sagactl.target). The server side, the clock itself, is local_aws.clock.

GET /_saga/clock answers a reading; POST /_saga/clock/advance {"seconds": N} answers JSON lines
as it goes: `{"moved": reading}` as soon as the clock jumped, `{"running": what,
"elapsed_seconds": s}` at least every second while what listens to the jump runs, then `{"done":
reading}` (with their effects) or `{"failed": text}`.
"""

from __future__ import annotations

import datetime as _datetime
import ipaddress
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CLOCK_PATH = "/_saga/clock"
ADVANCE_PATH = "/_saga/clock/advance"
# A bound that keeps every timestamp a datetime can hold (moto renders them as datetimes).
MAX_ADVANCE_SECONDS = 10 * 366 * 86400
# How long the client waits for any answer; an advance answers a line at least every
# HEARTBEAT_SECONDS however long its listeners run, so only a server that stopped serving
# times out.
_HTTP_TIMEOUT_SECONDS = 10.0
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


def checked_seconds(seconds: Any) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"seconds must be a number, got {seconds!r}")
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"the local clock only moves forward: seconds must be >= 0, got {seconds}")
    if value > MAX_ADVANCE_SECONDS:
        raise ValueError(f"at most {MAX_ADVANCE_SECONDS} seconds (10 years) per advance")
    return value


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class ClockUnavailable(Exception):
    """The local AWS at an endpoint did not answer its clock endpoint (not running, or not a
    `sagactl local up`)."""


class AdvanceUnfinished(Exception):
    """The clock jumped (`moved`), but what runs after a jump did not report back (`reason`):
    a listener failed, or the connection ended before it was done."""

    def __init__(self, moved: ClockReading, reason: str) -> None:
        super().__init__(reason)
        self.moved = moved
        self.reason = reason


def _open(url: str, data: bytes | None = None) -> Any:
    """The HTTP response of the local AWS's clock endpoint at `url`: ValueError for a request it
    refused (400), ClockUnavailable when it does not answer."""
    host = urllib.parse.urlsplit(url).hostname
    if host != "localhost" and not is_loopback(host):
        raise ClockUnavailable(f"{url}: the local AWS's clock is on a loopback address only")
    # No proxies: the local AWS is on loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 by construction)
        url, data=data, method="POST" if data is not None else "GET"
    )
    request.add_header("Content-Type", "application/json")
    try:
        return opener.open(request, timeout=_HTTP_TIMEOUT_SECONDS)
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except (ValueError, AttributeError):
            message = exc.reason
        if exc.code == 400:
            raise ValueError(str(message)) from None
        raise ClockUnavailable(f"{url}: HTTP {exc.code} {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ClockUnavailable(f"{url}: {getattr(exc, 'reason', exc)}") from None


def read_clock(endpoint: str) -> ClockReading:
    """The clock of the local AWS at `endpoint` (e.g. http://127.0.0.1:4566)."""
    url = endpoint.rstrip("/") + CLOCK_PATH
    try:
        with _open(url) as response:
            return ClockReading.from_json(json.loads(response.read()))
    except (OSError, ValueError, KeyError) as exc:
        raise ClockUnavailable(f"{url}: {exc}") from None


def advance_clock(
    endpoint: str, seconds: float, progress: Callable[[str, float], None] | None = None
) -> ClockReading:
    """Move the clock of the local AWS at `endpoint` forward, and wait for what runs after the
    jump, however long it takes (`progress(what, elapsed_seconds)` hears what it is, about every
    HEARTBEAT_SECONDS). ValueError if it refuses `seconds`; ClockUnavailable if the clock did not
    move; AdvanceUnfinished if it moved and the work after it did not report back."""
    checked_seconds(seconds)
    url = endpoint.rstrip("/") + ADVANCE_PATH
    response = _open(url, data=json.dumps({"seconds": seconds}).encode())
    moved: ClockReading | None = None
    reason = "the local AWS ended its answer before the work after the jump was done"
    try:
        with response:
            for raw in response:
                event = json.loads(raw)
                if "moved" in event:
                    moved = ClockReading.from_json(event["moved"])
                elif "running" in event and progress is not None:
                    progress(str(event["running"]), float(event.get("elapsed_seconds") or 0))
                elif "done" in event:
                    return ClockReading.from_json(event["done"])
                elif "failed" in event:
                    reason = str(event["failed"])
                    break
    except (OSError, ValueError, KeyError) as exc:  # a timeout, a broken connection or line
        reason = str(getattr(exc, "reason", None) or exc)
    if moved is None:
        raise ClockUnavailable(f"{url}: the clock did not move: {reason}")
    raise AdvanceUnfinished(moved, reason)
