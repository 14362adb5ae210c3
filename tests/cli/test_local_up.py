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

from local_aws.environment import StackSource
from local_aws.synth import stack_name_of_template
from sagactl.cli import build_parser, main
from tests.cli.sagactl_helpers import EXAMPLES
from tests.e2e.local_stack_fixture import TEMPLATE
from tests.infra.synth import Synthesized

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


def _up_fixture_stack(tmp_path: Path, port: int) -> tuple[subprocess.Popen[str], Path, Path]:
    """`sagactl local up` of the fixture template (stack `fx`) in another process, as a user
    runs it: the process, its state directory and the template file."""
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    state = tmp_path / "state"
    up = subprocess.Popen(
        _sagactl(*_local_up_args(state, template, port, "--stack-name", "fx")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([".", "lambdas"])},
    )
    return up, state, template


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(MAX_START_POLLS):
        if path.exists():
            return
        if process.poll() is not None:
            pytest.fail(f"sagactl local up exited early:\n{process.communicate()[1]}")
        time.sleep(0.1)
    process.kill()
    pytest.fail("sagactl local up did not come up")


def test_up_provisions_writes_its_environment_and_down_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    up, state, template = _up_fixture_stack(tmp_path, port)
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

        # A second shell with none of AWS's variables: the env file, sourced or eval'd, is all
        # it needs (the fixture stack has an inventory table).
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SAGA_"))}
        env_text = _run_sagactl("local", "--state-dir", str(state), "env")
        assert env_text.returncode == 0, env_text.stderr
        assert env_text.stdout == (state / "env").read_text(encoding="utf-8")
        for setup in (
            f"source {shlex.quote(str(state / 'env'))}",
            f"eval {shlex.quote(env_text.stdout)}",
        ):
            shown = subprocess.run(
                ["bash", "-c", f"{setup} && {shlex.quote(str(BIN / 'sagactl'))} inventory show"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env=bare,
            )
            assert shown.returncode == 0, shown.stderr
            assert "SKU-RED-MUG                 100 available" in shown.stdout

        # Without that environment, a command says how to use the running local AWS.
        for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "SAGA_LOCAL_OUTPUTS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr("sagactl.paths.LOCAL_STATE_DIR", state)
        assert main(["status", "case-1"]) == 1
        assert capsys.readouterr().err.strip() == (
            "sagactl: no AWS region configured: pass --region; a local AWS is running "
            f"(pid {up.pid}, http://127.0.0.1:{port}): to use it, source {state / 'env'} or "
            '`eval "$(sagactl local env)"` or pass --local'
        )

        again = _run_sagactl(*_local_up_args(state, template, _free_port()))
        assert again.returncode == 1
        assert f"already running (pid {up.pid}" in again.stderr

        down = _run_sagactl("local", "--state-dir", str(state), "down")
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == (
            f"stopped the local AWS (pid {up.pid}, http://127.0.0.1:{port}): every table, queue, "
            "key, function and execution of it is gone (the local AWS keeps them in memory): the "
            "next `sagactl local up` starts from an empty account"
        )
        _, stderr = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0
    assert not (state / "local.pid").exists()
    assert not (state / "env").exists()  # a stopped local AWS leaves no environment to source
    gone = _run_sagactl("local", "--state-dir", str(state), "env")
    assert (gone.returncode, gone.stdout) == (1, "")
    assert "no local AWS is running" in gone.stderr
    assert f"in another shell: source {state / 'env'}" in stderr
    # The env file: fake credentials and the loopback endpoint, where the outputs are, then the
    # stack's outputs, one export each (less Endpoint).
    lines = env_text.stdout.splitlines()[1:]
    assert lines[:6] == [
        f"export AWS_ENDPOINT_URL=http://127.0.0.1:{port}",
        "export AWS_ACCESS_KEY_ID=testing",
        "export AWS_SECRET_ACCESS_KEY=testing",
        "export AWS_DEFAULT_REGION=us-east-1",
        "export AWS_REGION=us-east-1",
        f"export SAGA_LOCAL_OUTPUTS={shlex.quote(str((state / 'outputs.json').resolve()))}",
    ]
    assert sorted(lines[6:]) == sorted(
        f"export {key}={shlex.quote(value)}" for key, value in outputs.items() if key != "Endpoint"
    )


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


def test_up_with_the_synthesized_template_names_resources_as_the_readme_and_logs_to_a_file(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    """`--template cdk.out/<stack>.template.json`: the stack name comes from the cloud assembly,
    so resources get the README's names; the handlers' JSON logs and metrics go to the handler
    log, not into the shell."""
    state = tmp_path / "state"
    port = _free_port()
    up = subprocess.Popen(
        _sagactl(*_local_up_args(state, synthesized.template_path, port, "--time-scale", "0.1")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(state / "local.pid", up)
        outputs = json.loads((state / "outputs.json").read_text(encoding="utf-8"))
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": outputs["Endpoint"],
            "SAGA_LOCAL_OUTPUTS": str(state / "outputs.json"),
        }
        started = subprocess.run(
            _sagactl("start", str(EXAMPLES / "happy-path.json"), "--watch"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        down = _run_sagactl("local", "--state-dir", str(state), "down")
        stdout, stderr = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()

    assert started.returncode == 0, started.stdout + started.stderr
    assert "outcome: COMPLETED" in started.stdout
    assert down.returncode == 0, down.stderr
    assert outputs["StateMachineArn"] == (
        "arn:aws:states:us-east-1:123456789012:stateMachine:"
        "ReplacementOrderSaga-dev-WorkflowStateMachine"
    )
    assert outputs["LedgerTableName"].startswith("ReplacementOrderSaga-dev-")
    assert stdout == ""  # no handler output in the shell
    assert f"handler logs: {state / 'handlers.log'}" in stderr.splitlines()
    logged = [json.loads(line) for line in (state / "handlers.log").read_text().splitlines()]
    decisions = [
        (line.get("action_key"), line.get("decision")) for line in logged if "decision" in line
    ]
    assert ("acme#reserve#case-happy-path.reserve", "claimed") in decisions
    metrics = [line for line in logged if "_aws" in line]  # CloudWatch embedded metric format
    assert any("CasesAccepted" in line for line in metrics), metrics


def test_the_stack_name_of_a_template_file(synthesized: Synthesized, tmp_path: Path) -> None:
    assert stack_name_of_template(synthesized.template_path) == "ReplacementOrderSaga-dev"
    copied = tmp_path / "ReplacementOrderSaga-alice.template.json"  # no manifest here
    copied.write_text(synthesized.template_path.read_text(encoding="utf-8"), encoding="utf-8")
    assert StackSource.from_file(copied).stack_name == "ReplacementOrderSaga-alice"
    assert StackSource.from_file(copied, "mine").stack_name == "mine"
    renamed = copied.rename(tmp_path / "template.json")
    assert stack_name_of_template(renamed) is None
    assert StackSource.from_file(renamed).stack_name == "saga-local"
