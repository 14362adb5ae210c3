"""`refund_ceilings` in cdk.json, checked at synth (docs/design.md §3.12, the daily ceiling).

`refund_ceilings` is `{tenant: {CURRENCY: minor units}}`: the most a tenant may refund in that
currency in one UTC day (saga.ceilings). Synth refuses what would make the rule meaningless: a
ceiling that is not a positive integer, a currency that is not a circulating ISO 4217 code, a
tenant that is not configured, and a ceiling below that tenant's four-eyes threshold for the
currency (every refund four eyes would ask two approvers for could never leave: the threshold
would be dead configuration).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.formats import currency_problem
from stacks.context import from_json, invalid, refused


def ceilings_value(value: Any) -> dict[str, dict[str, int]]:
    """The section's own values: an object of tenants, each an object of currencies, each a
    positive integer of minor units (`-c` gives the whole section as JSON)."""
    value = from_json(value)
    if not isinstance(value, Mapping):
        raise invalid(f"must be an object {{tenant: {{CURRENCY: minor units}}}}, got {value!r}")
    ceilings: dict[str, dict[str, int]] = {}
    for tenant, limits in value.items():
        where = f"context 'refund_ceilings.{tenant}'"
        if not isinstance(limits, Mapping) or not limits:
            raise refused(f"{where} must be a non-empty object {{CURRENCY: minor units}}")
        ceilings[tenant] = {}
        for currency, limit in limits.items():
            problem = currency_problem(currency)
            if problem is not None:
                raise refused(f"{where}: {currency!r} {problem}")
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise refused(
                    f"context 'refund_ceilings.{tenant}.{currency}' must be a positive integer "
                    f"of minor units, got {limit!r}"
                )
            ceilings[tenant][currency] = limit
    return ceilings


def check_ceilings(
    ceilings: Mapping[str, Mapping[str, int]],
    tenants: Mapping[str, tuple[str, ...]],
    thresholds: Mapping[str, Mapping[str, int]],
) -> None:
    """Each tenant with ceilings is configured, and no ceiling is below the tenant's four-eyes
    threshold for its currency."""
    for tenant, limits in ceilings.items():
        if tenant not in tenants:
            raise refused(
                f"context 'refund_ceilings.{tenant}' names no tenant of 'tenants' "
                f"({sorted(tenants)})"
            )
        for currency, ceiling in limits.items():
            threshold = thresholds.get(tenant, {}).get(currency)
            if threshold is not None and ceiling < threshold:
                raise refused(
                    f"context 'refund_ceilings.{tenant}.{currency}' ({ceiling}) is below "
                    f"'approval_thresholds.{tenant}.{currency}' ({threshold}): no refund four "
                    "eyes applies to could ever leave; raise the ceiling to at least the "
                    "threshold, or lower the threshold"
                )
