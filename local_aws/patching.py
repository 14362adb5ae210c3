"""How the local AWS changes moto's (and botocore's) behaviour: one method wrapped, once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def wrap_once(owner: Any, name: str, mark: str, wrap: Callable[[Any], Any]) -> None:
    """Replace `owner.name` by `wrap(original)`, unless a wrapper carrying `mark` is there
    already: installing twice must not wrap twice. The wrapper takes the original's name."""
    original = getattr(owner, name)
    if getattr(original, mark, False):
        return
    wrapped = functools.wraps(original)(wrap(original))
    setattr(wrapped, mark, True)
    setattr(owner, name, wrapped)
