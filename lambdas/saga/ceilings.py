"""A daily refund ceiling per tenant and currency (docs/design.md §3.12): how much may be refunded
in one UTC day, whatever agents propose and however many approvers sign.

The ceilings are trusted configuration (REFUND_CEILINGS, from cdk.json's `refund_ceilings`,
never the case): `{tenant: {CURRENCY: minor units}}`. A tenant without ceilings has no limit. A
tenant with ceilings fails closed: a currency it names no ceiling for may refund nothing.

The running total is one counter item per tenant, currency and UTC day in the limits table,
keyed `counter_key(tenant, currency, day)`, charged in the same transaction as the refund's
first claim (saga.ledger.charges) and given back only by a refund the provider refused, to the
day it was charged. Plain values here: no request is made.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from saga.errors import AuthorizationDenied, RefundLimitReached
from saga.formats import major_units, minor_units_by_tenant

Ceilings = Mapping[str, Mapping[str, int]]  # tenant -> currency -> minor units per UTC day
SECONDS_PER_DAY = 86_400
# Written at the end of a RefundLimitReached message: the numbers, for the state machine to put
# on the escalation (`limit`) and for a person to read.
LIMIT_MARK = " limit: "


def parse_ceilings(raw: str | Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """`{"tenant": {"CUR": minor units}}`; ValueError naming what is wrong."""
    return minor_units_by_tenant(raw, "ceilings")


def ceiling_for(ceilings: Ceilings, tenant_id: str, currency: str) -> int | None:
    """The tenant's ceiling for `currency` in minor units per UTC day; None when the tenant has
    no ceilings (no limit); 0 for a currency a tenant with ceilings names none for (fail
    closed: nothing may be refunded in it)."""
    limits = ceilings.get(tenant_id)
    if not limits:
        return None
    return limits.get(currency, 0)


# --- the counter: one item per tenant, currency and UTC day -------------------------------------
def utc_day(epoch: float) -> str:
    """The UTC day of an epoch time, `YYYY-MM-DD`: the day a refund's first claim charges."""
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def counter_key(tenant_id: str, currency: str, day: str) -> str:
    """The limits table's key of one day's counter (tenant ids and currencies hold no '#')."""
    return f"{tenant_id}#{currency}#{day}"


def counter_expires_at(day: str, retention_seconds: int) -> int:
    """The counter's TTL: the end of its day plus the ledger's retention plus a day. Every
    delivery that can give an amount back to it holds an open ledger record charged that day,
    and a workflow reaches such a delivery within the retention (14 days of redrives plus the
    execution's timeout, which the configuration keeps inside it)."""
    start = calendar.timegm(time.strptime(day, "%Y-%m-%d"))
    return start + SECONDS_PER_DAY + retention_seconds + SECONDS_PER_DAY


@dataclass(frozen=True)
class DailyCharge:
    """What a refund adds to its tenant's running total for a UTC day, and the ceiling it must
    stay within: the ledger charges it with the refund's first claim (saga.ledger.charges)."""

    table_name: str  # the limits table
    tenant_id: str
    currency: str
    amount_minor: int
    ceiling_minor: int
    retention_seconds: int  # the ledger's: the counter outlives every record charged to it

    def key(self, day: str) -> str:
        return counter_key(self.tenant_id, self.currency, day)

    @property
    def headroom(self) -> int:
        """The highest total before this refund that still leaves it within the ceiling
        (a condition has no arithmetic: computed here)."""
        return self.ceiling_minor - self.amount_minor

    def refused(self, used_minor: int | None, day: str) -> RefundLimitReached:
        """The recorded refusal, with the numbers (`used_minor` None: the counter was not read:
        the refund alone exceeds the ceiling)."""
        return limit_reached(
            self.tenant_id,
            self.currency,
            ceiling=self.ceiling_minor,
            used=used_minor,
            asked=self.amount_minor,
            day=day,
        )


def daily_charge(
    ceilings: Ceilings,
    *,
    tenant_id: str,
    currency: str,
    amount_minor: int,
    table_name: str,
    retention_seconds: int,
) -> DailyCharge | None:
    """The charge of a refund, or None for a tenant without ceilings (its claim stays one put)."""
    ceiling = ceiling_for(ceilings, tenant_id, currency)
    if ceiling is None:
        return None
    return DailyCharge(
        table_name, tenant_id, currency, amount_minor, ceiling, retention_seconds=retention_seconds
    )


# --- refusals ------------------------------------------------------------------------------------
def _money(amount_minor: int, currency: str) -> str:
    return f"{major_units(amount_minor, currency)} {currency} ({amount_minor} minor units)"


def limit_reached(
    tenant_id: str, currency: str, *, ceiling: int, used: int | None, asked: int, day: str
) -> RefundLimitReached:
    """RefundLimitReached with the numbers, in words and (after LIMIT_MARK) as JSON."""
    if ceiling == 0:
        why = f"tenant {tenant_id} has no daily refund ceiling for {currency}, so none may leave"
    elif used is None:
        why = (
            f"it exceeds tenant {tenant_id}'s daily refund ceiling for {currency} alone, "
            f"{_money(ceiling, currency)}"
        )
    else:
        why = (
            f"tenant {tenant_id}'s daily refund ceiling for {currency} is "
            f"{_money(ceiling, currency)} and {_money(used, currency)} of it is used on {day} "
            "(UTC)"
        )
    numbers = {"ceiling": ceiling, "used": used, "asked": asked, "currency": currency, "day": day}
    return RefundLimitReached(
        f"refund of {_money(asked, currency)} refused: {why}; nothing was refunded: a person "
        "decides whether to refund by other means or start the case again on a later day;"
        f"{LIMIT_MARK}{json.dumps(numbers, sort_keys=True)}"
    )


def check_within_ceiling(ceilings: Ceilings, tenant_id: str, currency: str, amount: int) -> None:
    """ValidateCase's check, before anything is reserved: a refund above the tenant's daily
    ceiling, or in a currency a tenant with ceilings names none for, can never pass the
    counter's condition on any day (a day's first refund would, whatever its amount: the
    condition admits it), so it is refused for good: AuthorizationDenied, with the numbers."""
    ceiling = ceiling_for(ceilings, tenant_id, currency)
    if ceiling is None or amount <= ceiling:
        return
    if ceiling == 0:
        raise AuthorizationDenied(
            f"tenant {tenant_id} has daily refund ceilings but none for {currency}: no {currency} "
            f"refund may leave (fail closed); refund in a currency the tenant has a ceiling for, "
            f"or add refund_ceilings.{tenant_id}.{currency} to the configuration"
        )
    raise AuthorizationDenied(
        f"the refund of {_money(amount, currency)} exceeds tenant {tenant_id}'s daily refund "
        f"ceiling for {currency}, {_money(ceiling, currency)}: it can never be refunded in one "
        "day; split it into cases within the ceiling, or raise "
        f"refund_ceilings.{tenant_id}.{currency}"
    )
