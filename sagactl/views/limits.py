"""The daily refund ceilings as `sagactl limits` shows them (docs/design.md §3.12): per tenant
and currency, the ceiling, what the day's counter says is used and what is left. Pure: what was
read in, rows out; no AWS call, no printing."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from saga.formats import major_units


@dataclass(frozen=True)
class LimitRow:
    tenant: str
    currency: str
    ceiling_minor: int
    used_minor: int
    left_minor: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        def money(minor: int) -> str:
            return f"{major_units(minor, self.currency)} {self.currency}"

        return (
            f"  {self.tenant:<12} {self.currency:<8} {money(self.ceiling_minor):>16} "
            f"{money(self.used_minor):>16} {money(self.left_minor):>16}"
        )


HEADER = f"  {'tenant':<12} {'currency':<8} {'ceiling':>16} {'used':>16} {'left':>16}"


def limit_rows(
    ceilings: dict[str, dict[str, int]], used: dict[tuple[str, str], int]
) -> list[LimitRow]:
    """One row per tenant and currency with a ceiling, in order; `used`: what the day's
    counters hold (a counter never written: nothing used). Left is never below zero."""
    rows = []
    for tenant in sorted(ceilings):
        for currency in sorted(ceilings[tenant]):
            ceiling = ceilings[tenant][currency]
            spent = used.get((tenant, currency), 0)
            rows.append(LimitRow(tenant, currency, ceiling, spent, max(0, ceiling - spent)))
    return rows
