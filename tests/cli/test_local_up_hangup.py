"""A caller that hangs up before its answer does not stop `sagactl local up`.

Before, `sagactl`'s main set SIGPIPE to its default action (for `sagactl ... | head`), so the
server's first write to a closed connection killed the whole local AWS, silently: a Ctrl-C'd
`aws lambda invoke`, a client's read timeout. The same disposition, left in the pytest process
by the in-process CLI tests, killed a pytest-xdist worker in the middle of the suite.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import boto3
import pytest

from tests.cli.test_local_up import (
    _free_port,
    _run_sagactl,
    _sagactl,
    _up_fixture_stack,
    _wait_for,
)
from tests.cli.test_sagactl_case import NEW_CASE

MAX_POLLS = 300  # x 0.05 s


def _invoke_and_hang_up(port: int, function: str, payload: dict[str, object]) -> None:
    """A raw Lambda Invoke (the local AWS checks no signature), closed as soon as it is sent."""
    body = json.dumps(payload).encode()
    head = (
        f"POST /2015-03-31/functions/{function}/invocations HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/lambda/"
        "aws4_request, SignedHeaders=host, Signature=0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as caller:
        caller.sendall(head.encode() + body)


def test_local_up_survives_a_caller_that_hangs_up_during_its_invocation(tmp_path: Path) -> None:
    port = _free_port()
    up, state, _ = _up_fixture_stack(tmp_path, port)
    try:
        _wait_for(state / "local.pid", up)
        outputs = json.loads((state / "outputs.json").read_text(encoding="utf-8"))
        ddb = boto3.client("dynamodb", endpoint_url=outputs["Endpoint"])
        counter = {"action_key": {"S": "hung-up#reject-calls"}}

        _invoke_and_hang_up(port, "fx-RejectFunction", {"case_id": "hung-up", "hold_seconds": 1})
        for _ in range(MAX_POLLS):  # the function ran to its end; its answer had no reader
            assert up.poll() is None, "sagactl local up died: a caller hung up"
            if "Item" in ddb.get_item(TableName=outputs["LedgerTableName"], Key=counter):
                break
            time.sleep(0.05)
        with pytest.raises(subprocess.TimeoutExpired):
            up.wait(timeout=2)  # the answer's write to the closed connection did not end it

        tables = ddb.list_tables()["TableNames"]
        assert sorted(tables) == ["fx-InventoryTable", "fx-LedgerTable"]
        down = _run_sagactl("local", "--state-dir", str(state), "down")
        assert down.returncode == 0, down.stderr
    finally:
        if up.poll() is None:
            up.kill()
        _, stderr = up.communicate(timeout=30)
    assert up.returncode == 0, stderr


def test_sagactl_whose_reader_went_away_ends_quietly() -> None:
    """`sagactl ... | head`: no traceback, no death by signal; exit 1 (Python's signal docs)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [*_sagactl(*NEW_CASE), "-o", "-"],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (1, "")
