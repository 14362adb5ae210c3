"""The local AWS's clock: real time plus a forward-only offset, its listeners, its HTTP face."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest

from sagactl.local.clock import (
    ADVANCE_PATH,
    CLOCK_PATH,
    MAX_ADVANCE_SECONDS,
    ClockEndpoint,
    ClockReading,
    ClockUnavailable,
    LocalClock,
    advance_clock,
    read_clock,
)


class RealTime:
    """A stand-in for time.time that tests move by hand."""

    def __init__(self) -> None:
        self.value = 1_800_000_000.0

    def __call__(self) -> float:
        return self.value


def test_the_clock_is_real_time_plus_what_was_advanced() -> None:
    real = RealTime()
    clock = LocalClock(real)
    assert clock.now() == real.value

    reading = clock.advance(7200)
    real.value += 5  # real time keeps running under the offset

    assert reading.offset_seconds == 7200
    assert clock.now() == 1_800_000_000.0 + 5 + 7200
    clock.advance(0.5)
    assert clock.offset_seconds == 7200.5


@pytest.mark.parametrize("bad", [-1, -0.001, math.inf, math.nan, "60", None, True])
def test_the_clock_never_goes_back_and_takes_numbers_only(bad: Any) -> None:
    clock = LocalClock(RealTime())
    clock.advance(10)

    with pytest.raises(ValueError, match="seconds must be"):
        clock.advance(bad)

    assert clock.offset_seconds == 10


def test_one_advance_is_bounded_so_timestamps_stay_representable() -> None:
    clock = LocalClock(RealTime())
    with pytest.raises(ValueError, match="10 years"):
        clock.advance(MAX_ADVANCE_SECONDS + 1)
    assert clock.offset_seconds == 0


def test_listeners_run_before_advance_returns_and_report_their_effects() -> None:
    real = RealTime()
    clock = LocalClock(real)
    seen: list[float] = []

    def sweep(now: float) -> dict[str, int]:
        seen.append(now)
        return {"ledger": len(seen)}

    clock.on_advance("ttl_deleted", sweep)
    clock.on_advance("ttl_deleted", sweep)  # registering again replaces, never doubles

    first = clock.advance(60)
    second = clock.advance(0)

    assert seen == [real.value + 60, real.value + 60]
    assert first.effects == {"ttl_deleted": {"ledger": 1}}
    assert second.effects == {"ttl_deleted": {"ledger": 2}}


def test_reset_goes_back_to_real_time() -> None:
    real = RealTime()
    clock = LocalClock(real)
    clock.advance(86400)
    clock.reset()
    assert (clock.now(), clock.offset_seconds) == (real.value, 0)


def test_a_reading_round_trips_through_json() -> None:
    reading = ClockReading(now=1_800_000_000.5, offset_seconds=3600, effects={"x": {"t": 1}})
    document = reading.to_json()
    assert document["now_utc"] == "2027-01-15T08:00:00Z"
    assert ClockReading.from_json(json.loads(json.dumps(document))) == reading


# -- the HTTP endpoint (WSGI) -----------------------------------------------------------------


def _call(
    endpoint: ClockEndpoint,
    path: str,
    *,
    method: str = "GET",
    body: bytes = b"",
    remote: str = "127.0.0.1",
) -> tuple[str, Any]:
    answer: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"] = status
        answer["type"] = dict(headers)["Content-Type"]

    environ = {
        "PATH_INFO": path,
        "REQUEST_METHOD": method,
        "REMOTE_ADDR": remote,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    chunks = endpoint(environ, start_response)
    if answer.get("type") != "application/json":
        return answer.get("status", ""), b"".join(chunks)
    return answer["status"], json.loads(b"".join(chunks))


def _endpoint() -> tuple[ClockEndpoint, LocalClock, list[str]]:
    passed: list[str] = []

    def moto(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        passed.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"moto"]

    clock = LocalClock(RealTime())
    return ClockEndpoint(moto, clock), clock, passed


def test_the_endpoint_reads_and_advances_the_clock() -> None:
    endpoint, clock, passed = _endpoint()

    status, advanced = _call(endpoint, ADVANCE_PATH, method="POST", body=b'{"seconds": 90}')
    assert status == "200 OK"
    assert advanced["offset_seconds"] == 90 and advanced["now"] == clock.now()
    status, read = _call(endpoint, CLOCK_PATH)
    assert (status, read["offset_seconds"]) == ("200 OK", 90)
    assert passed == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"seconds": -5}', "only moves forward"),
        (b'{"seconds": "5"}', "must be a number"),
        (b"[5]", '{"seconds": N}'),
        (b"not json", "Expecting value"),
    ],
)
def test_the_endpoint_refuses_bad_advances_and_changes_nothing(body: bytes, message: str) -> None:
    endpoint, clock, _ = _endpoint()

    status, answer = _call(endpoint, ADVANCE_PATH, method="POST", body=body)

    assert status == "400 Bad Request"
    assert message in answer["error"]
    assert clock.offset_seconds == 0


def test_the_endpoint_answers_loopback_clients_only_and_passes_everything_else_on() -> None:
    endpoint, clock, passed = _endpoint()

    status, answer = _call(
        endpoint, ADVANCE_PATH, method="POST", body=b'{"seconds": 5}', remote="10.1.2.3"
    )
    assert status == "403 Forbidden" and "loopback" in answer["error"]
    assert _call(endpoint, CLOCK_PATH, remote="::1")[0] == "200 OK"
    assert _call(endpoint, CLOCK_PATH, method="POST")[0] == "405 Method Not Allowed"
    assert _call(endpoint, ADVANCE_PATH)[0] == "405 Method Not Allowed"
    assert clock.offset_seconds == 0

    assert _call(endpoint, "/moto-api/reset", method="POST") == ("200 OK", b"moto")
    assert passed == ["/moto-api/reset"]


def test_the_client_talks_to_loopback_endpoints_only() -> None:
    for endpoint in ("https://dynamodb.us-east-1.amazonaws.com", "http://10.0.0.5:4566"):
        with pytest.raises(ClockUnavailable, match="loopback address only"):
            read_clock(endpoint)
        with pytest.raises(ClockUnavailable, match="loopback address only"):
            advance_clock(endpoint, 60)
