"""The input formats every payment provider and carrier behind the ports accepts (the contract).

ValidateCase checks a case against these rules before the first effect, and the sandbox
downstreams enforce the same rules, so a case that passes validation is never refused for its
format after stock was reserved or money refunded. The rules check, they never rewrite: the
approved (and signed) parameters stay exactly what was approved.

- Currencies: ISO 4217 codes of circulating currencies (fund codes, precious metals and test
  codes are not refundable; withdrawn codes such as HRK, BGN, ANG, SLL, ZWL are not accepted),
  and each one's minor unit (`currency_exponent`): amounts are integers in minor units, and
  what a person is shown in major units is derived here (`major_units`), nowhere else.
- Countries: ISO 3166-1 alpha-2, officially assigned codes (249).
- Address lines: the common limits of parcel carriers' APIs (35 characters per name and street
  line, 35 per city, postal codes of letters, digits, spaces and hyphens up to 10), text that is
  not blank once stripped and holds no control or invisible separator characters.
Source of the code lists: ISO 4217 amendment list and ISO 3166-1 as of 2026-11.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final


def _codes(text: str) -> frozenset[str]:
    return frozenset(text.split())


CURRENCY_CODES: Final[frozenset[str]] = _codes(
    """
    AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BHD BIF BMD BND BOB BRL BSD BTN BWP BYN
    BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP
    GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS
    KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR
    MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD
    RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP
    TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW
    ZWG
    """
)

# ISO 4217's minor unit of each accepted currency that does not have 2 decimals: `amount_minor`
# is in these units, and a refund of `amount_minor` is amount_minor / 10**exponent in major
# units (what a person reads: 2000 JPY minor units are 2000 yen, 2000 KWD minor units 2 dinars).
ZERO_DECIMAL_CURRENCIES: Final[frozenset[str]] = _codes(
    "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF"
)
THREE_DECIMAL_CURRENCIES: Final[frozenset[str]] = _codes("BHD IQD JOD KWD LYD OMR TND")

COUNTRY_CODES: Final[frozenset[str]] = _codes(
    """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ
    BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM
    DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS
    GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN
    KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ
    MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM
    PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV
    SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI
    VN VU WF WS YE YT ZA ZM ZW
    """
)

# Carrier limits, per address field (characters).
ADDRESS_TEXT_LIMITS: Final[Mapping[str, int]] = {"name": 35, "line1": 35, "city": 35}
POSTAL_CODE_MAX = 10
_POSTAL_CODE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 -]*[A-Za-z0-9])?")


def text_problem(value: object, limit: int) -> str | None:
    """Why a carrier would refuse this text field (None: it accepts it)."""
    if not isinstance(value, str) or not value.strip():
        return "must not be blank"
    if len(value) > limit:
        return f"must be at most {limit} characters (a carrier's limit), got {len(value)}"
    if not value.isprintable():  # control characters, line breaks, invisible separators
        return "must not contain control characters or line breaks"
    return None


def postal_code_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return "must not be blank"
    if len(value) > POSTAL_CODE_MAX:
        return f"must be at most {POSTAL_CODE_MAX} characters, got {len(value)}"
    if not _POSTAL_CODE.fullmatch(value):
        return "must be letters, digits, spaces and hyphens, starting and ending alphanumeric"
    return None


def country_problem(value: object) -> str | None:
    if value not in COUNTRY_CODES:
        return "must be an ISO 3166-1 alpha-2 country code (for example US, DE, JP)"
    return None


def currency_problem(value: object) -> str | None:
    if value not in CURRENCY_CODES:
        return "must be the ISO 4217 code of a circulating currency (for example USD, EUR, JPY)"
    return None


def currency_exponent(currency: str) -> int:
    """ISO 4217's minor unit: how many decimals `amount_minor` has in this currency."""
    if currency_problem(currency) is not None:
        raise ValueError(f"{currency!r} is not an accepted currency")
    if currency in ZERO_DECIMAL_CURRENCIES:
        return 0
    return 3 if currency in THREE_DECIMAL_CURRENCIES else 2


def major_units(amount_minor: int, currency: str) -> str:
    """`amount_minor` in the currency's major units, exactly, with its decimals: 2000 JPY ->
    "2000", 2000 USD -> "20.00", 2000 KWD -> "2.000" (never a float)."""
    exponent = currency_exponent(currency)
    sign = "-" if amount_minor < 0 else ""
    whole, fraction = divmod(abs(amount_minor), 10**exponent)
    return f"{sign}{whole}" + (f".{fraction:0{exponent}d}" if exponent else "")


def address_problems(address: Mapping[str, object]) -> dict[str, str]:
    """Every field a carrier would refuse, by field name (empty: the carrier accepts it)."""
    problems: dict[str, str] = {}
    for field, limit in ADDRESS_TEXT_LIMITS.items():
        problem = text_problem(address.get(field), limit)
        if problem is not None:
            problems[field] = problem
    for field, check in (("postal_code", postal_code_problem), ("country", country_problem)):
        problem = check(address.get(field))
        if problem is not None:
            problems[field] = problem
    return problems


def minor_units_by_tenant(raw: str | Mapping[str, Any], amounts: str) -> dict[str, dict[str, int]]:
    """`{"tenant": {"CUR": minor units}}` (approval thresholds, refund ceilings: `amounts` names
    them in the messages): each amount a positive integer, each currency a circulating ISO 4217
    code. Raises ValueError naming what is wrong."""
    value: Any = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, Mapping):
        raise ValueError('must be a JSON object {"tenant": {"CURRENCY": minor units}}')
    parsed: dict[str, dict[str, int]] = {}
    for tenant, limits in value.items():
        if not isinstance(limits, Mapping) or not limits:
            raise ValueError(f"[{tenant!r}] must map currencies to {amounts} in minor units")
        parsed[str(tenant)] = {}
        for currency, limit in limits.items():
            if currency_problem(currency) is not None:
                raise ValueError(f"[{tenant!r}][{currency!r}]: {currency_problem(currency)}")
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(
                    f"[{tenant!r}][{currency!r}] must be a positive integer of minor units, "
                    f"got {limit!r}"
                )
            parsed[str(tenant)][str(currency)] = limit
    return parsed
