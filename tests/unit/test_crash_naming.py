"""How the local runtime names a function that died (local_aws/lambda_errors.py): today's
names by default, Lambda.Unknown (no error type) when asked, by `sagactl local up
--crash-errors` or $SAGA_LOCAL_CRASH_ERRORS; every name it can give is one the definition
routes (stacks/lambda_errors.py)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

import local_aws.emulator
from local_aws.lambda_errors import CRASH_ERRORS_ENV, CrashNaming, crash_payload
from local_aws.lambda_runtime import (
    configure_runtime,
    crash_errors_named,
    current_runtime,
    restore_runtime,
)
from sagactl.cli import build_parser
from sagactl.commands.local import command_up
from sagactl.commands.local_common import LocalCommandError
from stacks.lambda_errors import LAMBDA_CRASH_ERRORS, Death


@pytest.fixture
def runtime() -> Iterator[None]:
    saved = current_runtime()
    yield
    restore_runtime(saved)


@pytest.mark.parametrize(
    ("death", "error", "text"),
    [
        (Death.TIMED_OUT, "Sandbox.Timedout", "Error: Task timed out after 30.00 seconds (x)"),
        (Death.EXITED, "Runtime.ExitError", "Error: Runtime exited with error: signal: killed"),
        (Death.OUT_OF_MEMORY, "Runtime.OutOfMemory", "Runtime exited with error: signal: killed"),
    ],
)
def test_a_death_is_answered_with_todays_name_or_without_a_type(
    death: Death, error: str, text: str
) -> None:
    current = crash_payload(
        death, CrashNaming.CURRENT, request_id="r-1", timeout_seconds=30, detail="x"
    )
    assert current["errorType"] == error
    assert error in LAMBDA_CRASH_ERRORS  # a name the definition routes
    assert current["errorMessage"].startswith("RequestId: r-1 ")
    assert text in current["errorMessage"]
    legacy = crash_payload(
        death, CrashNaming.LAMBDA_UNKNOWN, request_id="r-1", timeout_seconds=30, detail="x"
    )
    assert legacy == {"errorMessage": current["errorMessage"]}  # Step Functions: Lambda.Unknown


def test_the_naming_comes_from_the_environment_unless_given(
    runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CRASH_ERRORS_ENV, raising=False)
    configure_runtime("http://127.0.0.1:1")
    assert current_runtime().crash_errors is CrashNaming.CURRENT

    monkeypatch.setenv(CRASH_ERRORS_ENV, "lambda-unknown")
    configure_runtime("http://127.0.0.1:1")
    assert current_runtime().crash_errors is CrashNaming.LAMBDA_UNKNOWN
    configure_runtime("http://127.0.0.1:1", crash_errors=CrashNaming.CURRENT)
    assert current_runtime().crash_errors is CrashNaming.CURRENT
    with crash_errors_named(CrashNaming.LAMBDA_UNKNOWN):
        assert current_runtime().crash_errors is CrashNaming.LAMBDA_UNKNOWN
    assert current_runtime().crash_errors is CrashNaming.CURRENT

    monkeypatch.setenv(CRASH_ERRORS_ENV, "unknown")
    with pytest.raises(
        ValueError, match="SAGA_LOCAL_CRASH_ERRORS must be one of current, lambda-unknown"
    ):
        configure_runtime("http://127.0.0.1:1")


def test_local_up_passes_crash_errors_and_lambda_concurrency_to_the_local_aws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("SAGA_LOCAL_LAMBDA_CONCURRENCY", raising=False)
    seen: dict[str, Any] = {}

    class Server:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.update(kwargs)

        def start(self) -> None:
            raise OSError(98, "in use")  # stop before anything is served

    monkeypatch.setattr(local_aws.emulator, "LocalServer", Server)
    parse = build_parser().parse_args
    args: argparse.Namespace = parse(
        ["local", "--state-dir", str(tmp_path), "up", "--crash-errors", "lambda-unknown"]
    )
    with pytest.raises(LocalCommandError):
        command_up(args)
    assert seen["crash_errors"] is CrashNaming.LAMBDA_UNKNOWN
    assert seen["lambda_concurrency"] == 10  # $SAGA_LOCAL_LAMBDA_CONCURRENCY, else 10
    args = parse(["local", "--state-dir", str(tmp_path), "up", "--lambda-concurrency", "3"])
    with pytest.raises(LocalCommandError):
        command_up(args)
    assert seen["lambda_concurrency"] == 3

    assert parse(["local", "up"]).crash_errors is None  # then $SAGA_LOCAL_CRASH_ERRORS decides
    with pytest.raises(SystemExit):
        parse(["local", "up", "--crash-errors", "unknown"])
    with pytest.raises(SystemExit):
        parse(["local", "up", "--lambda-concurrency", "0"])


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        (CRASH_ERRORS_ENV, "SAGA_LOCAL_CRASH_ERRORS must be one of current, lambda-unknown"),
        ("SAGA_LOCAL_TIME_SCALE", "SAGA_LOCAL_TIME_SCALE must be a number >= 0"),
        (
            "SAGA_LOCAL_LAMBDA_CONCURRENCY",
            "SAGA_LOCAL_LAMBDA_CONCURRENCY must be a whole number >= 1",
        ),
    ],
)
def test_local_up_refuses_a_bad_environment_variable_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, variable: str, message: str
) -> None:
    started: list[bool] = []
    monkeypatch.setattr(local_aws.emulator, "LocalServer", lambda *a, **k: started.append(True))
    monkeypatch.setenv(variable, "bad")
    args = build_parser().parse_args(["local", "--state-dir", str(tmp_path), "up"])
    with pytest.raises(LocalCommandError, match=message):
        command_up(args)
    assert started == []  # nothing was started
