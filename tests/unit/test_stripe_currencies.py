"""Every accepted currency's amount at Stripe: exact, or refused (saga.providers.stripe_currencies).

The expectations are written out here, from Stripe's currency page (https://docs.stripe.com/currencies,
read 2026-12-07), one rule per currency, independently of the module's own lists."""

from __future__ import annotations

import pytest

from saga.formats import CURRENCY_CODES
from saga.providers.stripe_currencies import (
    UnrepresentableAmount,
    from_stripe_amount,
    to_stripe_amount,
)

# ISO 0 decimals, Stripe 0: the same number.
SAME_ZERO = [
    "BIF",
    "CLP",
    "DJF",
    "GNF",
    "JPY",
    "KMF",
    "KRW",
    "PYG",
    "RWF",
    "UGX",
    "VND",
    "VUV",
    "XAF",
    "XOF",
    "XPF",
]
# ISO 2 decimals, Stripe 0: divided by 100, a remainder refused.
DIVIDED = ["MGA"]
# ISO 0 decimals, Stripe 2 (divisible by 100): multiplied by 100.
MULTIPLIED = ["ISK"]
# ISO 3 decimals, Stripe 3 with the last digit 0.
TENS = ["BHD", "JOD", "KWD", "OMR", "TND"]
# ISO 3 decimals, no rule at Stripe: refused.
REFUSED = ["IQD", "LYD"]
SPECIAL = {*SAME_ZERO, *DIVIDED, *MULTIPLIED, *TENS, *REFUSED}
# Everything else: two decimals in both.
SAME_TWO = sorted(CURRENCY_CODES - SPECIAL)


def test_the_lists_cover_every_accepted_currency() -> None:
    assert SPECIAL <= CURRENCY_CODES
    assert {"USD", "EUR", "GBP", "HUF", "TWD"} <= set(SAME_TWO)


@pytest.mark.parametrize("currency", SAME_TWO + SAME_ZERO)
def test_the_same_minor_units(currency: str) -> None:
    assert to_stripe_amount(1, currency) == 1
    assert to_stripe_amount(123457, currency) == 123457
    assert from_stripe_amount(123457, currency) == 123457


@pytest.mark.parametrize("currency", DIVIDED)
def test_iso_two_decimals_stripe_zero_divides_exactly_or_refuses(currency: str) -> None:
    assert to_stripe_amount(250000, currency) == 2500
    assert from_stripe_amount(2500, currency) == 250000
    for inexact in (1, 99, 250001, 250050):
        with pytest.raises(UnrepresentableAmount, match="approve a multiple of 100"):
            to_stripe_amount(inexact, currency)


@pytest.mark.parametrize("currency", MULTIPLIED)
def test_iso_zero_decimals_stripe_two_multiplies(currency: str) -> None:
    assert to_stripe_amount(2500, currency) == 250000
    assert to_stripe_amount(1, currency) == 100
    assert from_stripe_amount(250000, currency) == 2500
    with pytest.raises(UnrepresentableAmount):
        from_stripe_amount(250050, currency)  # a fraction of a króna: no ISO amount


@pytest.mark.parametrize("currency", TENS)
def test_three_decimals_end_in_zero_or_are_refused(currency: str) -> None:
    assert to_stripe_amount(5120, currency) == 5120
    assert from_stripe_amount(5130, currency) == 5130
    for inexact in (5124, 1, 9):
        with pytest.raises(UnrepresentableAmount, match="multiples of 10"):
            to_stripe_amount(inexact, currency)


@pytest.mark.parametrize("currency", REFUSED)
def test_three_decimals_stripe_does_not_document_are_refused(currency: str) -> None:
    for amount in (1000, 5120):
        with pytest.raises(UnrepresentableAmount, match=f"no amount rule for {currency}"):
            to_stripe_amount(amount, currency)


def test_validate_cases_stripe_rules_import_no_sdk() -> None:
    """ValidateCase checks cases for Stripe without the SDK (only the refund's function has it)."""
    import subprocess
    import sys

    from saga_bench.coldstart import LAMBDAS_DIR

    probe = (
        "import sys\nimport saga.providers.stripe_rules\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('stripe', 'requests')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS_DIR, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
