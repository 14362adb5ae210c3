"""A campaign's checks: how many ran, and the violations found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Checks:
    """Checks run and the violations found, each with the invariant's name and what was seen."""

    run: int = 0
    violations: list[dict[str, str]] = field(default_factory=list)
    by_invariant: Counter[str] = field(default_factory=Counter)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.run += 1
        self.by_invariant[name] += 1
        if not ok:
            self.violations.append({"invariant": name, "detail": detail})
        return ok


def fields_of(record: Mapping[str, Any] | None, *names: str) -> Any:
    return None if record is None else tuple(record.get(name) for name in names)
