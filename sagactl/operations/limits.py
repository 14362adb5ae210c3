"""The daily refund ceilings of a stack and what its counters say of one UTC day
(docs/design.md §3.12): the ceilings from the stack's `RefundCeilings` output, one consistent
GetItem per tenant and currency on the limits table (`LimitsTableName`)."""

from __future__ import annotations

from saga.ceilings import counter_key, parse_ceilings
from sagactl.errors import NotFound, SagactlError, TargetError
from sagactl.operations.signing import stack_approval_keys
from sagactl.target import Target
from sagactl.views.limits import LimitRow, limit_rows

CEILINGS_OUTPUT = "RefundCeilings"
LIMITS_TABLE_OUTPUT = "LimitsTableName"
_FEATURE = "the daily refund ceiling"


def stack_ceilings(target: Target) -> dict[str, dict[str, int]]:
    """The ceilings the deployed tools enforce: tenant -> currency -> minor units per day."""
    raw = target.newer_output(CEILINGS_OUTPUT, _FEATURE, TargetError)
    try:
        return parse_ceilings(raw)
    except ValueError as exc:
        raise SagactlError(f"the {CEILINGS_OUTPUT} output: {exc}") from None


def daily_limits(target: Target, *, day: str, tenant: str | None = None) -> list[LimitRow]:
    """Each ceiling (of `tenant`, if given) with what `day`'s counter says is used and left.
    NotFound for a tenant the stack does not have (its ApprovalKeys output names every one);
    a tenant it has without a ceiling has no rows."""
    ceilings = stack_ceilings(target)
    if tenant is not None:
        tenants = sorted(stack_approval_keys(target))
        if tenant not in tenants:
            where = "the local AWS" if target.local else f"stack {target.stack_name}"
            raise NotFound(
                f"no tenant {tenant!r} in {where} (its tenants: {', '.join(tenants)}); "
                "check the name, or deploy the tenant first (cdk.json `tenants`)"
            )
        ceilings = {tenant: ceilings[tenant]} if tenant in ceilings else {}
    if not ceilings:
        return []
    table = target.newer_output(LIMITS_TABLE_OUTPUT, _FEATURE, TargetError)
    client = target.client("dynamodb")
    used: dict[tuple[str, str], int] = {}
    for name, limits in ceilings.items():
        for currency in limits:
            item = client.get_item(
                TableName=table,
                Key={"counter_key": {"S": counter_key(name, currency, day)}},
                ConsistentRead=True,
            ).get("Item")
            total = ((item or {}).get("total") or {}).get("N")
            used[(name, currency)] = int(total) if total is not None else 0
    return limit_rows(ceilings, used)
