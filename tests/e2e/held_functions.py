"""Hold a function of the local AWS (its runtime runs in the test process): an execution that
reaches it stays RUNNING there until the test lets it go."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from moto.awslambda.models import LambdaFunction


@contextmanager
def function_held(monkeypatch: pytest.MonkeyPatch, construct_id: str) -> Iterator[threading.Event]:
    """The invokes of the function whose name contains `construct_id` (`ValidateCase`,
    `IssueRefund`) wait, outside the runtime's invoke lock, until the block ends: an execution
    that reaches it meanwhile stays RUNNING there. Yields the event set once one waits."""
    waiting, released = threading.Event(), threading.Event()
    original = LambdaFunction._invoke_lambda

    def held(function: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        if construct_id in function.function_name and not released.is_set():
            waiting.set()
            released.wait(timeout=120)
        return original(function, event)

    with monkeypatch.context() as patch:
        patch.setattr(LambdaFunction, "_invoke_lambda", held)
        try:
            yield waiting
        finally:
            released.set()


def validate_case_held(
    monkeypatch: pytest.MonkeyPatch,
) -> AbstractContextManager[threading.Event]:
    """ValidateCase held: an execution started meanwhile stays RUNNING at ValidateCase."""
    return function_held(monkeypatch, "ValidateCase")
