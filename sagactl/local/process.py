"""The running `sagactl local up`: its pid file in the state directory, and stopping it.

`sagactl local up` writes `<state dir>/local.pid` ({"pid", "endpoint", "port"}) once its stack is
provisioned and removes it when it stops; `down`, `advance` and `clock` find it there.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

PID_FILE_NAME = "local.pid"
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


def remove_own_pid_file(state_dir: Path) -> None:
    """Remove the pid file if this process wrote it (another `up` may have replaced it)."""
    record = read_pid_file(state_dir) if pid_file(state_dir).exists() else None
    if record is not None and record.get("pid") == os.getpid():
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
