"""The running `sagactl local up`: its pid file and environment file in the state directory,
and stopping it.

`sagactl local up` writes `<state dir>/local.pid` ({"pid", "endpoint", "port"}) and
`<state dir>/env` (the `export` lines a client shell sources) once its stack is provisioned, and
removes both when it stops; `down`, `advance`, `clock` and `env` find it there, and so does every
other command that finds no AWS configuration (`usage_hint`).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

PID_FILE_NAME = "local.pid"
ENV_FILE_NAME = "env"
STOP_WAIT_SECONDS = 15.0


class LocalProcessError(Exception):
    """The pid file cannot be read, or the process would not stop (printed, no traceback)."""


def pid_file(state_dir: Path) -> Path:
    return state_dir / PID_FILE_NAME


def read_pid_file(state_dir: Path) -> dict[str, Any] | None:
    path = pid_file(state_dir)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise LocalProcessError(f"unreadable pid file {path}: {exc}") from exc
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        raise LocalProcessError(f"malformed pid file {path}")
    return record


def write_pid_file(state_dir: Path, endpoint: str, port: int) -> None:
    pid_file(state_dir).write_text(
        json.dumps({"pid": os.getpid(), "endpoint": endpoint, "port": port}), encoding="utf-8"
    )


def env_file(state_dir: Path) -> Path:
    return state_dir / ENV_FILE_NAME


def export_lines(environment: dict[str, str]) -> list[str]:
    return [f"export {key}={shlex.quote(value)}" for key, value in environment.items()]


def write_env_file(state_dir: Path, environment: dict[str, str]) -> Path:
    """`<state dir>/env`: what a shell sources to use this local AWS (fake credentials only)."""
    path = env_file(state_dir)
    header = "# the local AWS of `sagactl local up` (fake credentials, loopback): source this file"
    path.write_text("\n".join([header, *export_lines(environment)]) + "\n", encoding="utf-8")
    return path


def remove_own_pid_file(state_dir: Path) -> None:
    """Remove the pid and env files if this process wrote them (another `up` may have replaced
    them)."""
    record = read_pid_file(state_dir) if pid_file(state_dir).exists() else None
    if record is not None and record.get("pid") == os.getpid():
        env_file(state_dir).unlink(missing_ok=True)
        pid_file(state_dir).unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An exited process whose parent has not reaped it yet (a zombie) has stopped.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def is_local_server(pid: int) -> bool:
    """The pid still belongs to a `sagactl local up` (not a recycled pid)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # no procfs: trust the pid file
        return process_alive(pid)
    try:
        text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "sagactl" in text or "sagactl.cli" in text


def running_local_server(state_dir: Path) -> dict[str, Any] | None:
    """The pid file's record when its `sagactl local up` is still running, else None."""
    record = read_pid_file(state_dir)
    if record and process_alive(record["pid"]) and is_local_server(record["pid"]):
        return record
    return None


def stop_local_server(state_dir: Path, pid: int) -> None:
    """SIGTERM, then wait until the process has exited; its pid file is removed."""
    os.kill(pid, signal.SIGTERM)
    polls = int(STOP_WAIT_SECONDS / 0.1)
    for _ in range(polls):
        if not process_alive(pid):
            break
        time.sleep(0.1)
    else:
        raise LocalProcessError(
            f"the local AWS (pid {pid}) did not stop within {STOP_WAIT_SECONDS}s"
        )
    pid_file(state_dir).unlink(missing_ok=True)
    env_file(state_dir).unlink(missing_ok=True)


def usage_hint(state_dir: Path) -> str | None:
    """How to point a command at the running `sagactl local up` of `state_dir`, or None when
    none runs: for the commands that found no AWS configuration (region, credentials, stack)."""
    try:
        running = running_local_server(state_dir)
    except LocalProcessError:
        return None
    if running is None:
        return None
    env = env_file(state_dir)
    source = f"source {shlex.quote(str(env))}" if env.exists() else None
    how = " or ".join(
        part for part in (source, '`eval "$(sagactl local env)"`', "pass --local") if part
    )
    where = f"pid {running['pid']}, {running.get('endpoint')}"
    return f"a local AWS is running ({where}): to use it, {how}"
