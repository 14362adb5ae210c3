"""Amounts between ISO 4217 minor units (what an approval signs) and Stripe's `amount`, exactly.

Source: Stripe's "Supported currencies" page, https://docs.stripe.com/currencies (sections
"Zero-decimal currencies", "Three-decimal currencies", "Special cases"), and Stripe's support
note on ISK (https://support.stripe.com/questions/deprecation-of-fractional-isk-charges-and-refunds),
read 2026-12-07. Where Stripe's rule and ISO 4217's minor unit (saga.formats) disagree, a
conversion is exact or refused: never rounded, since the approval signed this amount.

- Zero-decimal at Stripe (the amount is in major units): BIF CLP DJF GNF JPY KMF KRW MGA PYG
  RWF UGX VND VUV XAF XOF XPF. All but MGA have ISO's 0 decimals too; MGA has ISO's 2, so
  Stripe's amount is ISO's divided by 100, and an amount with a remainder is refused.
- Three-decimal at Stripe: BHD JOD KWD OMR TND, as ISO; Stripe requires the last digit to be 0
  (amounts in tens of the minor unit), so any other amount is refused.
- ISK: ISO's 0 decimals, but Stripe keeps it two-decimal for backwards compatibility and
  requires amounts divisible by 100: Stripe's amount is ISO's times 100.
- HUF and TWD: two-decimal at Stripe for charges and refunds, as ISO (their special case is for
  payouts only, which the saga does not make).
- IQD and LYD: three-decimal in ISO, and neither in Stripe's three-decimal list nor among its
  special cases: refused, rather than guessed at a factor of 10.
- Every other accepted currency: two-decimal, as ISO.

Whether an account can take payments in a currency at all is the account's matter: the
refund is checked against the payment's own currency before it is sent (saga.providers.stripe).
"""

from __future__ import annotations

from typing import Final

from saga.formats import currency_exponent

SOURCE: Final = "https://docs.stripe.com/currencies (read 2026-12-07)"

ZERO_DECIMAL: Final = frozenset(
    [
        "BIF",
        "CLP",
        "DJF",
        "GNF",
        "JPY",
        "KMF",
        "KRW",
        "MGA",
        "PYG",
        "RWF",
        "UGX",
        "VND",
        "VUV",
        "XAF",
        "XOF",
        "XPF",
    ]
)
THREE_DECIMAL: Final = frozenset(["BHD", "JOD", "KWD", "OMR", "TND"])
# Stripe's amount must be a multiple of this (three-decimal: the last digit 0; ISK: whole króna).
GRANULARITY: Final = {**dict.fromkeys(THREE_DECIMAL, 10), "ISK": 100}
NOT_DOCUMENTED: Final = frozenset({"IQD", "LYD"})


def _power(exponent: int) -> int:
    return int(10**exponent)


class UnrepresentableAmount(ValueError):
    """The signed amount has no exact Stripe amount; the message says why and what to do."""


def stripe_exponent(currency: str) -> int:
    """How many decimals Stripe's `amount` has in this currency."""
    if currency in NOT_DOCUMENTED:
        raise UnrepresentableAmount(
            f"Stripe documents no amount rule for {currency} (ISO 4217: 3 decimals; Stripe's "
            f"three-decimal currencies are {', '.join(sorted(THREE_DECIMAL))}); refund it "
            "outside the saga"
        )
    if currency in ZERO_DECIMAL:
        return 0
    if currency in THREE_DECIMAL:
        return 3
    return 2


def to_stripe_amount(amount_minor: int, currency: str) -> int:
    """Stripe's `amount` for `amount_minor` ISO minor units; UnrepresentableAmount if none is
    exact (a remainder, or a last digit Stripe does not accept)."""
    iso, stripe = currency_exponent(currency), stripe_exponent(currency)
    if stripe >= iso:
        amount = amount_minor * _power(stripe - iso)
    else:
        amount, remainder = divmod(amount_minor, _power(iso - stripe))
        if remainder:
            raise UnrepresentableAmount(
                f"{amount_minor} {currency} minor units (ISO 4217: {iso} decimals) are not a "
                f"whole amount at Stripe, which takes {currency} with {stripe} decimals: "
                f"approve a multiple of {_power(iso - stripe)}"
            )
    step = GRANULARITY.get(currency, 1)
    if amount % step:  # a three-decimal currency: the signed amount in ISO's minor units
        raise UnrepresentableAmount(
            f"{amount_minor} {currency} minor units: Stripe accepts {currency} amounts only in "
            f"multiples of {step} minor units (the last digit 0); approve a multiple of {step}"
        )
    return amount


def from_stripe_amount(amount: int, currency: str) -> int:
    """ISO minor units for Stripe's `amount` (a refund's, a payment's); UnrepresentableAmount
    when it has no exact ISO amount (an MGA amount is always exact: Stripe's unit is larger)."""
    iso, stripe = currency_exponent(currency), stripe_exponent(currency)
    if iso >= stripe:
        return amount * _power(iso - stripe)
    whole, remainder = divmod(amount, _power(stripe - iso))
    if remainder:
        raise UnrepresentableAmount(
            f"Stripe amount {amount} {currency} is not a whole number of ISO minor units"
        )
    return whole
