"""`local_clock`: move the local AWS's clock forward within one test.

It moves the one clock of the local AWS (`LOCAL_CLOCK`, local_aws/clock.py), and makes it
`saga.clock` in this process for the test (a `mock_aws` test calls handlers here), so the
server (redrive window, execution dates), the handlers in the local AWS's worker processes
(leases, the sweeper's grace) and handlers called in this process all read the moved clock.
Import the fixture into a test module (`from tests.local_clock import local_clock`) to use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from local_aws.clock import LOCAL_CLOCK
from saga import clock


@pytest.fixture
def local_clock() -> Iterator[Callable[[float], None]]:
    """`local_clock(seconds)`: from now on the clock reads `seconds` later than at the start of
    the test (never less than before: the local clock only moves forward)."""
    moved = [0.0]
    previous = clock.use(LOCAL_CLOCK.now)

    def move(seconds: float) -> None:
        if seconds < moved[0]:
            raise ValueError(f"the local clock only moves forward: {seconds} < {moved[0]}")
        LOCAL_CLOCK.advance(seconds - moved[0])
        moved[0] = seconds

    try:
        yield move
    finally:
        LOCAL_CLOCK.reset()
        clock.use(previous)
