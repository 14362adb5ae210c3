"""The local Lambda runs invocations as Lambda does (docs/design.md §7, local_aws.lambda_pool):
concurrently, each in a process of its own that is warm and reused, killed and answered
`Sandbox.Timedout` past its function's timeout, and throttled past a concurrency limit."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.environment import LocalAws
from local_aws.lambda_pool import ConcurrencyLimits, TooManyRequests

HANDLERS = "tests.e2e.worker_handlers"


@pytest.fixture
def make_function(fixture_local_aws: LocalAws) -> Callable[..., str]:
    lambda_ = fixture_local_aws.client("lambda")
    role = lambda_.get_function_configuration(FunctionName="fx-RecordFunction")["Role"]

    def make(name: str, handler: str, timeout: int = 30, **variables: str) -> str:
        lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler=f"{HANDLERS}.{handler}",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # the project's code runs
            Timeout=timeout,
            Environment={"Variables": variables},
        )
        return name

    return make


def invoke(local: LocalAws, function: str, event: dict[str, Any]) -> tuple[bool, Any]:
    """(errored, answer) of a synchronous Invoke."""
    response = local.client("lambda").invoke(
        FunctionName=function, Payload=json.dumps(event).encode()
    )
    return bool(response.get("FunctionError")), json.loads(response["Payload"].read())


class Held:
    """Invocations of `hold` in flight, each in its own thread, until `release()`."""

    def __init__(self, local: LocalAws, function: str, directory: Path) -> None:
        self.local, self.function, self.directory = local, function, directory
        self.answers: list[Any] = []
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        def run() -> None:
            try:
                self.answers.append(invoke(self.local, self.function, {"dir": str(self.directory)}))
            except BaseException as exc:  # the test asserts on it
                self.errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def wait_started(self, count: int) -> list[Path]:
        for _ in range(3000):
            started = sorted(self.directory.glob("started-*"))
            if len(started) >= count:
                return started
            time.sleep(0.01)
        raise AssertionError(f"{len(list(self.directory.glob('started-*')))} started, not {count}")

    def release(self) -> None:
        (self.directory / "release").write_text("go")
        for thread in self.threads:
            thread.join(timeout=60)


@pytest.fixture
def held(fixture_local_aws: LocalAws, tmp_path: Path) -> Iterator[Callable[[str], Held]]:
    made: list[Held] = []

    def hold(function: str) -> Held:
        made.append(Held(fixture_local_aws, function, tmp_path))
        return made[-1]

    yield hold
    for each in made:
        each.release()


def test_two_invocations_run_at_once_each_in_its_own_process_then_one_is_reused(
    fixture_local_aws: LocalAws,
    make_function: Callable[..., str],
    held: Callable[[str], Held],
    capsys: pytest.CaptureFixture[str],
) -> None:
    function = make_function("fx-Hold", "hold", MARK="the function's own")
    calls = held(function)
    calls.start()
    calls.start()

    started = calls.wait_started(2)  # both in flight at once: neither has been released
    calls.release()

    assert calls.errors == []
    answers = [answer for errored, answer in calls.answers if not errored]
    assert len(answers) == 2
    pids = {answer["pid"] for answer in answers}
    assert len(pids) == 2 and os.getpid() not in pids  # two processes, neither the server's
    assert {p.read_text() for p in started} == {str(pid) for pid in pids}
    assert [answer["calls"] for answer in answers] == [1, 1]  # each its own globals
    assert {answer["mark"] for answer in answers} == {"the function's own"}
    # Their output reached the handler log (here: the test's stdout).
    out = capsys.readouterr().out
    assert all(f"hold {answer['request_id']} released" in out for answer in answers)

    # The next invocation runs in a warm process: one of the two, its globals kept.
    errored, again = invoke(fixture_local_aws, function, {"dir": str(started[0].parent)})
    assert not errored and again["pid"] in pids and again["calls"] == 2


def test_an_invocation_past_its_timeout_is_killed_and_answered_sandbox_timedout(
    fixture_local_aws: LocalAws, make_function: Callable[..., str]
) -> None:
    function = make_function("fx-Sleep", "sleep", timeout=1)
    errored, warm = invoke(fixture_local_aws, function, {"seconds": 0})
    assert not errored

    errored, answer = invoke(fixture_local_aws, function, {"seconds": 10})

    assert errored and answer["errorType"] == "Sandbox.Timedout"
    assert "Error: Task timed out after 1.00 seconds" in answer["errorMessage"]
    with pytest.raises(ProcessLookupError):  # the process that ran it was killed
        for _ in range(100):
            os.kill(warm["pid"], 0)
            time.sleep(0.05)
    errored, after = invoke(fixture_local_aws, function, {"seconds": 0})
    assert not errored and after["pid"] != warm["pid"]  # a new environment


def test_past_its_reserved_concurrency_an_invoke_is_throttled(
    fixture_local_aws: LocalAws, make_function: Callable[..., str], held: Callable[[str], Held]
) -> None:
    function = make_function("fx-Hold", "hold")
    lambda_ = fixture_local_aws.client("lambda")
    lambda_.put_function_concurrency(FunctionName=function, ReservedConcurrentExecutions=1)
    calls = held(function)
    calls.start()
    calls.wait_started(1)

    with pytest.raises(ClientError) as caught:
        invoke(fixture_local_aws, function, {"dir": "unused"})

    response: Any = caught.value.response  # Invoke's 429 carries a Reason
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert response["Error"]["Code"] == "TooManyRequestsException"
    assert response["Reason"] == "ReservedFunctionConcurrentInvocationLimitExceeded"
    calls.release()
    assert calls.errors == [] and [errored for errored, _ in calls.answers] == [False]


def test_a_task_of_a_throttled_function_fails_with_lambda_too_many_requests(
    fixture_local_aws: LocalAws,
) -> None:
    """Reserved concurrency 0 throttles every invoke: Step Functions names it
    Lambda.TooManyRequestsException (the saga's Retry policies list it)."""
    lambda_ = fixture_local_aws.client("lambda")
    lambda_.put_function_concurrency(
        FunctionName="fx-RecordFunction", ReservedConcurrentExecutions=0
    )

    description, history = fixture_local_aws.run_case({"case_id": "throttled"}, name="throttled")

    assert description["status"] == "FAILED"
    [failed] = [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]
    assert failed["error"] == "Lambda.TooManyRequestsException"
    assert "Status Code: 429" in failed["cause"]


def test_the_account_limit_is_shared_by_functions_without_reserved_concurrency() -> None:
    limits = ConcurrencyLimits(account_limit=3)
    with limits.slot("a", 1), limits.slot("b", None), limits.slot("c", None):
        # 3 - 1 reserved for "a": two unreserved, both in use
        with pytest.raises(TooManyRequests) as caught, limits.slot("b", None):
            pass
        assert json.loads(caught.value.description)["Reason"] == (
            "ConcurrentInvocationLimitExceeded"
        )
        with pytest.raises(TooManyRequests), limits.slot("a", 1):
            pass
        assert limits.in_flight() == 3
    assert limits.in_flight() == 0


def test_a_worker_reads_the_local_clock_as_it_moves(
    fixture_local_aws: LocalAws, make_function: Callable[..., str]
) -> None:
    function = make_function("fx-Now", "now")
    _, before = invoke(fixture_local_aws, function, {})

    fixture_local_aws.clock.advance(3600)
    _, after = invoke(fixture_local_aws, function, {})

    assert after["pid"] == before["pid"]  # the same warm process saw the move
    assert 3600 <= after["now"] - before["now"] < 3660
    assert abs(after["now"] - fixture_local_aws.clock.now()) < 60
