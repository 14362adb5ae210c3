"""`sagactl local up` on a port another program holds: one line, a non-zero exit, at once.

Before, moto's server thread died on the bind (werkzeug prints "Address already in use" and
exits the thread) while `local up` waited forever for it to be ready, deaf to Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e.local_stack_fixture import TEMPLATE

BIN = Path(sys.executable).parent
MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def test_local_up_on_a_busy_port_fails_at_once_with_one_line(tmp_path: Path) -> None:
    template = tmp_path / "fx.template.json"
    template.write_text(json.dumps(TEMPLATE), encoding="utf-8")
    state = tmp_path / "state"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        completed = subprocess.run(
            [
                *(str(BIN / "sagactl"), "local", "--state-dir", str(state)),
                *("up", "--port", str(port), "--template", str(template)),
            ],
            capture_output=True,
            text=True,
            timeout=60,  # the bug: it never returned
            check=False,
        )

    assert completed.returncode == 1
    assert completed.stderr.splitlines() == [
        f"sagactl local: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another program holds the port: stop it, or pass --port)"
    ]
    assert completed.stdout == ""
    assert not (state / "local.pid").exists()
    assert not (state / "outputs.json").exists()


def test_make_local_up_passes_the_port() -> None:
    def dry_run(*variables: str) -> str:
        return subprocess.run(
            ["make", "-n", "-f", str(MAKEFILE), "local-up", *variables],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd=MAKEFILE.parent,
        ).stdout

    assert ".venv/bin/sagactl local up --port 4567\n" in dry_run("PORT=4567")
    assert ".venv/bin/sagactl local up\n" in dry_run()
