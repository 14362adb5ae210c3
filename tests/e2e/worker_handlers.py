"""Handlers for the tests of the local Lambda's workers (tests/e2e/test_local_lambda_workers.py).

They run in the local AWS's worker processes, so they tell the test what they saw through their
answer and through files in the directory the event names.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from saga import clock

CALLS = 0  # this process's invocations: a module global, as a Lambda container keeps it


def hold(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Say it started (a file named after its request id), then wait for the release file."""
    global CALLS  # noqa: PLW0603 (the global is the point)
    CALLS += 1
    directory = Path(event["dir"])
    (directory / f"started-{context.aws_request_id}").write_text(str(os.getpid()))
    for _ in range(2000):
        if (directory / "release").exists():
            break
        time.sleep(0.01)
    print(f"hold {context.aws_request_id} released")
    return {
        "pid": os.getpid(),
        "calls": CALLS,
        "mark": os.environ.get("MARK"),
        "request_id": context.aws_request_id,
    }


def sleep(event: dict[str, Any], context: Any) -> dict[str, Any]:
    time.sleep(float(event["seconds"]))
    return {"pid": os.getpid()}


def now(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"now": clock.now(), "pid": os.getpid()}
