"""`sagactl local up` / `local down` as a user runs them: a separate process, signals, files."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagactl.cli import build_parser
from tests.e2e.local_stack_fixture import TEMPLATE

BIN = Path(sys.executable).parent
MAX_START_POLLS = 600  # x 0.1 s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _sagactl(*args: str) -> list[str]:
    return [str(BIN / "sagactl"), *args]


def _run_sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    """One sagactl command to completion; the caller checks the exit code."""
    return subprocess.run(_sagactl(*args), capture_output=True, text=True, timeout=60, check=False)


def _local_up_args(state: Path, template: Path, port: int, *extra: str) -> tuple[str, ...]:
    return (
        "local",
        "--state-dir",
        str(state),
        "up",
        "--port",
        str(port),
        "--template",
        str(template),
        *extra,
    )


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(MAX_START_POLLS):
        if path.exists():
            return
        if process.poll() is not None:
            pytest.fail(f"sagactl local up exited early:\n{process.communicate()[1]}")
        time.sleep(0.1)
    process.kill()
    pytest.fail("sagactl local up did not come up")


def test_up_provisions_prints_exports_and_down_stops_it(tmp_path: Path) -> None:
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    state = tmp_path / "state"
    port = _free_port()
    up = subprocess.Popen(
        _sagactl(*_local_up_args(state, template, port, "--stack-name", "fx")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([".", "lambdas"])},
    )
    try:
        _wait_for(state / "local.pid", up)
        outputs = json.loads((state / "outputs.json").read_text())
        assert outputs["Endpoint"] == f"http://127.0.0.1:{port}"
        assert outputs["LedgerTableName"] == "fx-LedgerTable"
        assert json.loads((state / "local.pid").read_text())["pid"] == up.pid

        listed = subprocess.run(
            [str(BIN / "aws"), "--endpoint-url", outputs["Endpoint"], "dynamodb", "list-tables"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        tables = sorted(json.loads(listed.stdout)["TableNames"])
        assert tables == ["fx-InventoryTable", "fx-LedgerTable"]

        again = _run_sagactl(*_local_up_args(state, template, _free_port()))
        assert again.returncode == 1
        assert f"already running (pid {up.pid}" in again.stderr

        down = _run_sagactl("local", "--state-dir", str(state), "down")
        assert down.returncode == 0, down.stderr
        stdout, _ = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0
    assert not (state / "local.pid").exists()
    lines = stdout.splitlines()
    assert lines[:5] == [
        f"export AWS_ENDPOINT_URL=http://127.0.0.1:{port}",
        "export AWS_ACCESS_KEY_ID=testing",
        "export AWS_SECRET_ACCESS_KEY=testing",
        "export AWS_DEFAULT_REGION=us-east-1",
        "export AWS_REGION=us-east-1",
    ]
    # Then the stack's outputs, one export each, as in .local/outputs.json (less Endpoint).
    outputs = json.loads((state / "outputs.json").read_text(encoding="utf-8"))
    assert sorted(lines[5:]) == sorted(
        f"export {key}={shlex.quote(value)}" for key, value in outputs.items() if key != "Endpoint"
    )
    assert "export StateMachineArn=arn:aws:states:" in stdout


def test_down_without_a_server_and_with_a_stale_pid_file(tmp_path: Path) -> None:
    nothing = _run_sagactl("local", "--state-dir", str(tmp_path), "down")
    assert (nothing.returncode, nothing.stderr.strip()) == (0, "no local AWS is running")

    dead_pid = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_pid.wait()
    (tmp_path / "local.pid").write_text(json.dumps({"pid": dead_pid.pid, "endpoint": "x"}))
    stale = _run_sagactl("local", "--state-dir", str(tmp_path), "down")
    assert stale.returncode == 0
    assert "removed a stale pid file" in stale.stderr
    assert not (tmp_path / "local.pid").exists()


def test_up_arguments() -> None:
    args = build_parser().parse_args(["local", "up", "--port", "5000", "--no-seed"])
    assert (args.port, args.seed, args.host, args.time_scale) == (5000, False, "127.0.0.1", None)
    defaults = build_parser().parse_args(["local", "up", "--seed"])
    assert (defaults.port, defaults.seed) == (4566, True)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["local", "up", "--time-scale", "-1"])
