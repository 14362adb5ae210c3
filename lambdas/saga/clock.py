"""The one wall clock of the Lambda code (epoch seconds).

Every default `clock` in the ledger, the tools and the sandbox downstreams is `saga.clock.now`, so
leases, retention, the payment provider's key retention and every timestamp read the same time.
On AWS it is `time.time`. The local AWS runs the handlers in its own process and moves this clock
(`use`) so that hours and days can pass in a test; nothing else should call `use`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]

_source: Clock = time.time


def now() -> float:
    """Seconds since the epoch, from the current source (`time.time` unless an emulator set it)."""
    return _source()


def use(source: Clock) -> Clock:
    """Make `source` the clock of this process; returns the previous one (to restore it)."""
    global _source
    previous, _source = _source, source
    return previous


def iso(epoch: float) -> str:
    """An epoch time as ISO 8601 UTC to the second (`2023-11-14T22:13:20Z`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def now_iso(clock: Clock = now) -> str:
    return iso(clock())
