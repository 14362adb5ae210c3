"""The daily refund ceiling's configuration and arithmetic (saga.ceilings, docs/design.md §3.12)."""

from __future__ import annotations

import json

import pytest

from saga.ceilings import (
    LIMIT_MARK,
    ceiling_for,
    counter_expires_at,
    counter_key,
    daily_charge,
    limit_reached,
    parse_ceilings,
    utc_day,
)
from saga.settings import ConfigurationError, parse_refund_ceilings

CEILINGS = {"acme": {"USD": 10_000, "JPY": 500_000}}


def test_a_tenant_without_ceilings_has_no_limit_and_one_with_them_fails_closed() -> None:
    assert ceiling_for(CEILINGS, "globex", "USD") is None
    assert ceiling_for(CEILINGS, "acme", "USD") == 10_000
    assert ceiling_for(CEILINGS, "acme", "EUR") == 0  # no EUR ceiling: no EUR refund
    assert (
        daily_charge(
            CEILINGS,
            tenant_id="globex",
            currency="USD",
            amount_minor=1,
            table_name="limits",
            retention_seconds=1,
        )
        is None
    )


def test_the_headroom_is_the_ceiling_less_the_refund() -> None:
    charge = daily_charge(
        CEILINGS,
        tenant_id="acme",
        currency="USD",
        amount_minor=700,
        table_name="limits",
        retention_seconds=30 * 86_400,
    )
    assert charge is not None
    assert charge.headroom == 9_300
    assert charge.key("2026-03-01") == "acme#USD#2026-03-01"


def test_the_day_is_the_utc_day_and_the_counter_outlives_the_retention() -> None:
    assert utc_day(1_772_409_599) == "2026-03-01"  # 23:59:59 UTC
    assert utc_day(1_772_409_600) == "2026-03-02"
    assert counter_key("acme", "USD", "2026-03-01") == "acme#USD#2026-03-01"
    # the end of the day (2026-03-02T00:00Z) + 30 days of retention + a day
    assert counter_expires_at("2026-03-01", 30 * 86_400) == 1_772_409_600 + 31 * 86_400


def test_the_refusal_says_the_numbers_in_words_and_as_json() -> None:
    refused = limit_reached("acme", "JPY", ceiling=500_000, used=499_000, asked=2_000, day="D")
    assert refused.message.startswith(
        "refund of 2000 JPY (2000 minor units) refused: tenant acme's daily refund ceiling for "
        "JPY is 500000 JPY (500000 minor units) and 499000 JPY (499000 minor units) of it is "
        "used on D (UTC); nothing was refunded"
    )
    numbers = json.loads(refused.message.split(LIMIT_MARK, 1)[1])
    assert numbers == {
        "ceiling": 500_000,
        "used": 499_000,
        "asked": 2_000,
        "currency": "JPY",
        "day": "D",
    }


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"acme": {"USD": 0}}', r"\['acme'\]\['USD'\] must be a positive integer"),
        ('{"acme": {"USD": 12.5}}', r"must be a positive integer of minor units, got 12.5"),
        ('{"acme": {"USD": true}}', r"must be a positive integer"),
        ('{"acme": {"XYZ": 100}}', r"\['acme'\]\['XYZ'\]: "),
        ('{"acme": {}}', r"\['acme'\] must map currencies to ceilings"),
        ("[1]", "must be a JSON object"),
    ],
)
def test_ceilings_are_positive_minor_units_in_circulating_currencies(
    raw: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_ceilings(raw)
    with pytest.raises(ConfigurationError, match="REFUND_CEILINGS"):
        parse_refund_ceilings(raw)
    assert parse_ceilings('{"acme": {"USD": 100}}') == {"acme": {"USD": 100}}
    with pytest.raises(ConfigurationError, match="REFUND_CEILINGS is not valid JSON"):
        parse_refund_ceilings("{")
