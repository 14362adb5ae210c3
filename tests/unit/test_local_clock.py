"""The local AWS's clock: real time plus a forward-only offset, its listeners, its HTTP face."""

from __future__ import annotations

import io
import json
import math
import threading
from typing import Any

import pytest

from local_aws import clock as clock_module
from local_aws.clock import ClockEndpoint, LocalClock
from local_aws.shared_clock import SharedOffset
from sagactl.clock_client import (
    ADVANCE_PATH,
    CLOCK_PATH,
    MAX_ADVANCE_SECONDS,
    ClockReading,
    ClockUnavailable,
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
    if answer.get("type") == "application/x-ndjson":  # an advance: its JSON lines, in order
        return answer["status"], [json.loads(line) for line in chunks]
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

    status, lines = _call(endpoint, ADVANCE_PATH, method="POST", body=b'{"seconds": 90}')
    assert status == "200 OK"
    assert [next(iter(line)) for line in lines] == ["moved", "done"]
    advanced = lines[-1]["done"]
    assert advanced["offset_seconds"] == 90 and advanced["now"] == clock.now()
    assert lines[0]["moved"]["offset_seconds"] == 90
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


def test_a_listener_may_start_a_worker_that_maps_the_clock_during_the_advance() -> None:
    """The scheduled sweep an advance fires may need a new Lambda worker, which asks for the
    clock's shared file: asking must not wait for the advance that is waiting for the sweep."""
    clock = LocalClock(RealTime())
    mapped: list[float] = []

    def start_worker(_now: float) -> bool:
        worker = threading.Thread(
            target=lambda: mapped.append(SharedOffset(clock.shared_path(), writable=False).read())
        )
        worker.start()
        worker.join(timeout=5)
        return not worker.is_alive()

    clock.on_advance("sweep", start_worker)

    reading = clock.advance(600)

    assert reading.effects == {"sweep": True}
    assert mapped == [600]  # the worker reads the clock as moved


def test_an_advance_streams_the_jump_then_what_runs_after_it_until_it_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slow listener keeps the answer alive with a line per heartbeat that says what runs,
    and the jump is reported before it, so a client never mistakes slow work for no jump."""
    monkeypatch.setattr(clock_module, "HEARTBEAT_SECONDS", 0.01)
    endpoint, clock, _ = _endpoint()
    release = threading.Event()
    doing = ["checking the schedules"]
    clock.on_advance("sweep", lambda _now: release.wait(5), doing=lambda: doing[0])
    status = ""
    lines_or_bytes: Any = []

    def call() -> None:
        nonlocal status, lines_or_bytes
        status, lines_or_bytes = _call(
            endpoint, ADVANCE_PATH, method="POST", body=b'{"seconds": 60}'
        )

    caller = threading.Thread(target=call)
    caller.start()
    for _ in range(500):  # the listener has started: the jump is done
        if clock.offset_seconds == 60:
            break
        threading.Event().wait(0.01)
    threading.Event().wait(0.1)
    doing[0] = "running the sweeper"  # asked again at every heartbeat
    threading.Event().wait(0.1)
    release.set()
    caller.join(timeout=10)

    assert status == "200 OK"
    kinds = [next(iter(line)) for line in lines_or_bytes]
    assert kinds[0] == "moved" and kinds[-1] == "done"
    running = [line["running"] for line in lines_or_bytes if "running" in line]
    assert running[0] == "checking the schedules" and running[-1] == "running the sweeper"
    assert lines_or_bytes[-1]["done"]["effects"] == {"sweep": True}


def test_a_failed_listener_is_reported_after_the_jump() -> None:
    endpoint, clock, _ = _endpoint()

    def broken(_now: float) -> None:
        raise RuntimeError("the sweeper is gone")

    clock.on_advance("sweep", broken)

    status, lines = _call(endpoint, ADVANCE_PATH, method="POST", body=b'{"seconds": 60}')

    assert status == "200 OK"
    assert lines[0]["moved"]["offset_seconds"] == 60
    assert lines[-1] == {"failed": "RuntimeError: the sweeper is gone"}
    assert clock.offset_seconds == 60
