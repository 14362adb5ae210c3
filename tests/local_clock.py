"""`local_clock`: move the local AWS's clock (`saga.clock`) forward within one test.

The local AWS runs in the test process, so its server (redrive window, execution dates) and the
in-process handlers (leases, the sweeper's grace) all read the moved clock. Import the fixture
into a test module (`from tests.local_clock import local_clock`) to use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from saga import clock


@pytest.fixture
def local_clock() -> Iterator[Callable[[float], None]]:
    """`local_clock(seconds)`: from now on the clock reads `seconds` later (0 undoes it)."""
    offset = [0.0]
    previous = clock.use(lambda: previous() + offset[0])

    def move(seconds: float) -> None:
        offset[0] = seconds

    try:
        yield move
    finally:
        clock.use(previous)
