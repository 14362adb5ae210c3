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

from stacks.context import minor_units_by_tenant, refused

ceilings_value = minor_units_by_tenant("refund_ceilings")


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
