"""The local clock's offset shared with the Lambda worker processes (local_aws/clock.py).

The server's `LOCAL_CLOCK` writes its offset into a small memory-mapped file every time it moves;
each worker maps the same file and reads it on every `saga.clock.now()`, so a handler in a
worker reads the one clock of its local AWS, whenever it moves (a test's `advance`, a nemesis's
jump in the middle of an invocation). One writer, many readers, no lock between processes: a
sequence number that is odd while a write is under way (a seqlock) lets a reader retry instead
of reading half a write.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import struct
import tempfile
import time

_SEQUENCE = struct.Struct("<Q")  # at 0: odd while a write is under way
_OFFSET = struct.Struct("<d")  # at 8: the offset in seconds
_SIZE = _SEQUENCE.size + _OFFSET.size


class SharedOffset:
    """An offset in seconds, in a file mapped by the writer and its readers."""

    def __init__(self, path: str, *, writable: bool) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        self._map = mmap.mmap(self._fd, _SIZE, access=access)

    @classmethod
    def create(cls) -> SharedOffset:
        """A new file (removed when this process exits) holding offset 0."""
        fd, path = tempfile.mkstemp(prefix="saga-clock-")
        os.write(fd, bytes(_SIZE))
        os.close(fd)
        atexit.register(_remove, path)
        return cls(path, writable=True)

    def write(self, offset: float) -> None:
        """One writer at a time (the clock's lock on this file)."""
        (sequence,) = _SEQUENCE.unpack_from(self._map)
        _SEQUENCE.pack_into(self._map, 0, sequence + 1)  # odd: being written
        _OFFSET.pack_into(self._map, _SEQUENCE.size, offset)
        _SEQUENCE.pack_into(self._map, 0, sequence + 2)

    def read(self) -> float:
        while True:
            (before,) = _SEQUENCE.unpack_from(self._map)
            (offset,) = _OFFSET.unpack_from(self._map, _SEQUENCE.size)
            (after,) = _SEQUENCE.unpack_from(self._map)
            if before == after and before % 2 == 0:
                return float(offset)

    def now(self) -> float:
        """Epoch seconds on the shared clock (real time plus the offset)."""
        return time.time() + self.read()

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
