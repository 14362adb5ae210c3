"""`approval_thresholds` in cdk.json, checked at synth (docs/design.md §9, four eyes).

`approval_thresholds` is `{tenant: {CURRENCY: minor units}}`: a refund above its currency's
threshold needs two distinct approvers of the tenant (saga.four_eyes). Synth refuses what would
make the rule meaningless or unsatisfiable: a threshold that is not a positive integer, a
currency that is not a circulating ISO 4217 code, a tenant that is not configured or has fewer
than two approvers. And for every tenant, thresholds or not, two approvers who share a key or a
signing principal: the verifier counts keys, so a key (or a principal who may sign with two
keys) shared by two approvers would let one person count as two.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from saga.formats import currency_problem
from saga.four_eyes import FOUR_EYES
from stacks.config_sections import ApproverKeyConfig
from stacks.context import from_json, invalid, refused


def thresholds_value(value: Any) -> dict[str, dict[str, int]]:
    """The section's own values: an object of tenants, each an object of currencies, each a
    positive integer of minor units (`-c` gives the whole section as JSON)."""
    value = from_json(value)
    if not isinstance(value, Mapping):
        raise invalid(f"must be an object {{tenant: {{CURRENCY: minor units}}}}, got {value!r}")
    thresholds: dict[str, dict[str, int]] = {}
    for tenant, limits in value.items():
        where = f"context 'approval_thresholds.{tenant}'"
        if not isinstance(limits, Mapping) or not limits:
            raise refused(f"{where} must be a non-empty object {{CURRENCY: minor units}}")
        thresholds[tenant] = {}
        for currency, limit in limits.items():
            problem = currency_problem(currency)
            if problem is not None:
                raise refused(f"{where}: {currency!r} {problem}")
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise refused(
                    f"context 'approval_thresholds.{tenant}.{currency}' must be a positive "
                    f"integer of minor units, got {limit!r}"
                )
            thresholds[tenant][currency] = limit
    return thresholds


def check_thresholds_name_four_eyes_tenants(
    thresholds: Mapping[str, Mapping[str, int]], tenants: Mapping[str, tuple[str, ...]]
) -> None:
    """Each tenant with thresholds is configured and has at least two approvers."""
    for tenant in thresholds:
        approvers = tenants.get(tenant)
        if approvers is None:
            raise refused(
                f"context 'approval_thresholds.{tenant}' names no tenant of 'tenants' "
                f"({sorted(tenants)})"
            )
        if len(set(approvers)) < FOUR_EYES:
            raise refused(
                f"context 'approval_thresholds.{tenant}': four eyes needs at least {FOUR_EYES} "
                f"approvers of the tenant, 'tenants.{tenant}' has {len(set(approvers))}: add "
                "an approver or remove the thresholds"
            )


def check_no_shared_signers(
    tenants: Mapping[str, tuple[str, ...]], keys_of: Callable[[str, str], ApproverKeyConfig]
) -> None:
    """No two approvers of one tenant share a key (a brought `key_arn` or retired key) or a
    signing principal (`principal`); `keys_of(tenant, approver)` is how each signs. Keys the
    stack creates, and the approver roles that sign with them, are each one approver's."""
    for tenant, approvers in tenants.items():
        key_owner: dict[str, str] = {}
        principal_owner: dict[str, str] = {}
        for approver in approvers:
            spec = keys_of(tenant, approver)
            for key in (spec.key_arn, *spec.retired_key_arns):
                if key is None:
                    continue
                other = key_owner.setdefault(key, approver)
                if other != approver:
                    raise refused(_shared(tenant, other, approver, f"the key {key}"))
            if spec.principal is not None:
                other = principal_owner.setdefault(spec.principal, approver)
                if other != approver:
                    raise refused(
                        _shared(tenant, other, approver, f"the signing principal {spec.principal}")
                    )


def _shared(tenant: str, first: str, second: str, what: str) -> str:
    return (
        f"context 'approval_keys': {first!r} and {second!r} of tenant {tenant!r} share {what}: "
        "approvals are counted by key, so one person could count as two approvers; give each "
        "approver their own key and principal"
    )
