"""A Lambda cold start without garbage-collection passes over what it has just created.

Importing a handler and making its first clients create about 77,000 objects (modules, classes,
pydantic validators, botocore's service models) that live as long as the process. Python's
cyclic collector walks them over and over while they are being created: one full pass over them
takes about 37 ms, and the passes during a reserve handler's cold start cost about as much of
its ~320 ms (CPU time, `make bench`; a bare boto3 handler loses about 13 ms the same way).

So, in a Lambda runtime, the collector pauses for the cold start: `saga.handlers` pauses it
before a handler module imports (`pause_collection`), and when the first invocation returns,
every object alive then is frozen (`gc.freeze`: never scanned again, which also shortens every
later collection; the few hundred objects of cyclic garbage from the cold start stay, anything
else is freed by reference counting as usual) and collecting resumes (`resumed_collection`).
This is the pattern the gc module documents for a process whose startup objects live to its end.

Only where `AWS_LAMBDA_RUNTIME_API` is set (the Lambda runtime interface): pytest and the local
AWS import handlers into long-lived processes and keep their collector as it is.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class _State:
    paused = False


def pause_collection() -> None:
    """Pause the cyclic collector for the rest of the cold start (in a Lambda runtime only)."""
    if os.environ.get("AWS_LAMBDA_RUNTIME_API") and gc.isenabled():
        gc.disable()
        _State.paused = True


def resume_collection() -> None:
    """End the cold start's pause: freeze what exists, collect again. Idempotent."""
    if _State.paused:
        _State.paused = False
        gc.freeze()
        gc.enable()


def resumed_collection(handler: Callable[P, R]) -> Callable[P, R]:
    """Decorate a handler so that the end of its first invocation ends the cold start's pause
    (its clients, made on that invocation and kept for the container's life, are frozen too)."""

    @functools.wraps(handler)
    def invoke(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return handler(*args, **kwargs)
        finally:
            resume_collection()

    return invoke


__all__ = ["pause_collection", "resume_collection", "resumed_collection"]
