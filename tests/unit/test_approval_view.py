"""What an approver is shown before signing (sagactl.views.approval): every consequential
parameter, the refund exactly as signed in minor units and in major units with the currency's
own decimals (saga.formats, the rules the payment port takes its currencies from)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from saga.formats import CURRENCY_CODES, currency_exponent, major_units
from saga.models import approval_digest
from sagactl.cli import main
from sagactl.commands import case_approve as case_command
from sagactl.errors import EXIT_REFUSED
from sagactl.views.approval import Signing, describe_case, describe_draft, shown
from tests.tools_harness import BASE_CASE

# ISO 4217: 0 decimals (JPY), 2 (USD), 3 (KWD, BHD).
AMOUNTS = [
    ("JPY", 2000, "2000 minor units of JPY = 2000 JPY (0 decimals)"),
    ("USD", 2000, "2000 minor units of USD = 20.00 USD (2 decimals)"),
    ("KWD", 2000, "2000 minor units of KWD = 2.000 KWD (3 decimals)"),
    ("BHD", 1234567, "1234567 minor units of BHD = 1234.567 BHD (3 decimals)"),
    ("USD", 5, "5 minor units of USD = 0.05 USD (2 decimals)"),
]


def _case(currency: str, amount_minor: int) -> dict[str, Any]:
    case = copy.deepcopy(BASE_CASE)
    case["case_id"] = "case-shown"
    case["refund"] = {
        "payment_reference": "pay-9",
        "amount_minor": amount_minor,
        "currency": currency,
    }
    case["approval"]["digest"] = "sha256:" + "ab" * 32
    return case


@pytest.mark.parametrize(("currency", "amount", "shown"), AMOUNTS)
def test_both_approval_paths_show_the_amount_with_the_currencys_decimals(
    currency: str, amount: int, shown: str
) -> None:
    case = _case(currency, amount)
    draft = {
        "case_id": "case-shown",
        "tenant_id": "acme",
        "request_id": "ticket-1",
        "created_at": "2026-11-30T10:00:00Z",
        "revision": 1,
        "digest": case["approval"]["digest"],
        "parameters": {k: case[k] for k in ("order", "reserve", "refund", "shipment")},
    }
    from_file = describe_case(case)
    from_draft = describe_draft(draft, "supervisor@acme")

    refund_line = f"  refund    {shown} on payment pay-9"
    assert refund_line in from_file and refund_line in from_draft
    # Every consequential parameter, the same lines whichever way the case is approved.
    assert from_file[1:] == from_draft[1:]
    assert from_file[1:] == [
        "  order     ord-1001 of customer cus-42",
        "  reserve   1 x SKU-RED-MUG",
        refund_line,
        f"  ship to   {case['shipment']['address']['name']}, "
        f"{case['shipment']['address']['line1']}, {case['shipment']['address']['postal_code']} "
        f"{case['shipment']['address']['city']}, {case['shipment']['address']['country']}",
        "  revision  1",
        f"  digest    {case['approval']['digest']}",
        "  approver  supervisor@acme",
    ]


def test_every_accepted_currency_has_an_exponent_and_exact_major_units() -> None:
    assert {currency_exponent(code) for code in CURRENCY_CODES} == {0, 2, 3}
    for code in CURRENCY_CODES:
        exponent = currency_exponent(code)
        text = major_units(10**exponent + 1, code)  # one major unit and one minor unit
        assert text == ("2" if exponent == 0 else "1." + "0" * (exponent - 1) + "1"), code
    with pytest.raises(ValueError, match="not an accepted currency"):
        currency_exponent("XTS")


# ISO 4217's circulating currencies whose minor unit is 3 decimals (the amendment list as of
# 2026-11), written out here rather than read from saga.formats: a code left out there must fail.
ISO_4217_THREE_DECIMALS = ("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND")


@pytest.mark.parametrize("currency", ISO_4217_THREE_DECIMALS)
def test_every_three_decimal_currency_is_shown_to_an_approver_with_three_decimals(
    currency: str,
) -> None:
    """Each of them, not a sample (issue 41, item 7): 1234567 minor units are 1234.567, never
    12345.67; an approver reading the two-decimal figure would sign ten times the refund."""
    lines = describe_case(_case(currency, 1234567))
    assert (
        f"  refund    1234567 minor units of {currency} = 1234.567 {currency} (3 decimals) "
        "on payment pay-9"
    ) in lines


def test_no_other_currency_is_shown_with_three_decimals() -> None:
    three = {code for code in CURRENCY_CODES if currency_exponent(code) == 3}
    assert three == set(ISO_4217_THREE_DECIMALS)


def _draft(**changes: Any) -> dict[str, Any]:
    case = _case("USD", 2000)
    parameters = {k: case[k] for k in ("order", "reserve", "refund", "shipment")}
    digest = approval_digest({**case, "approval": {"revision": 1, "approved_by": "x"}})
    draft = {
        "case_id": "agt_acme_abcdefghijkl",
        "tenant_id": "acme",
        "request_id": "ticket-1",
        "created_at": "2026-11-30T10:00:00Z",
        "revision": 1,
        "digest": digest,
        "parameters": parameters,
    }
    return {**draft, **changes}


def test_a_drafts_untrusted_text_is_shown_escaped_never_acted_on_by_the_terminal() -> None:
    draft = _draft(
        request_id="T-1\x1b]0;approved\x07\x1b[2J\rOK",  # retitle, clear the screen, overwrite
        created_at="2026-11-30\n  refund    1 USD\u202e",  # a forged line, a bidi override
    )
    shown_text = "\n".join(describe_draft(draft, "supervisor@acme"))

    assert shown_text.isprintable() is False  # the lines' own breaks
    assert all(line.isprintable() for line in shown_text.splitlines())
    assert "proposed as request T-1\\x1b]0;approved\\x07\\x1b[2J\\rOK at " in shown_text
    assert "at 2026-11-30\\n  refund    1 USD\\u202e" in shown_text
    assert shown("C:\\x1b") == "C:\\\\x1b"  # a literal backslash cannot forge an escape


@pytest.mark.parametrize(
    ("tampered", "refused"),
    [
        ({"digest": "sha256:" + "0" * 64}, "digest does not match its parameters"),
        ({"parameters": {"order": {}}}, "not a valid case"),
    ],
)
def test_a_draft_is_checked_before_it_is_shown_or_anyone_is_asked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tampered: dict[str, Any],
    refused: str,
) -> None:
    draft = _draft(**tampered)
    asked: list[str] = []
    monkeypatch.setattr(case_command, "resolve_target", lambda args: object())
    monkeypatch.setattr(case_command, "open_draft", lambda target, case_id: draft)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)

    def ask(*prompt: object) -> str:
        asked.append("asked")
        return "y"

    monkeypatch.setattr("builtins.input", ask)

    code = main(["case", "approve", "--case", draft["case_id"], "--as", "supervisor@acme"])

    out, err = capsys.readouterr()
    assert code == EXIT_REFUSED
    assert refused in err and "nothing signed" in err
    assert asked == [] and "approve and sign" not in err
    assert "refund" not in out  # nothing of the draft was shown as if it could be signed


def test_four_eyes_shows_what_the_refund_needs_who_signed_and_what_is_left() -> None:
    case = _case("USD", 250_000)
    case["tenant_id"] = "hooli"
    why = "tenant hooli's threshold for USD is 100000 minor units (1000.00 USD)"
    first = describe_case(case, approver="controller@hooli", signing=Signing(2, why))
    second = describe_case(
        case,
        approver="cfo@hooli",
        signing=Signing(2, why, [("controller@hooli", "2026-11-30T10:00:00Z")]),
    )
    again = describe_case(
        case,
        approver="controller@hooli",
        signing=Signing(2, why, [("controller@hooli", "2026-11-30T10:00:00Z")]),
    )

    assert first[-3:] == [
        "  approver  controller@hooli",
        f"  approvals 2 from distinct approvers ({why})",
        "  with you  1 of 2 approvals: one more approver of the tenant must sign",
    ]
    assert second[-2:] == [
        "  signed    by controller@hooli at 2026-11-30T10:00:00Z",
        "  with you  2 of 2 approvals: it can start",
    ]
    assert again[-1] == "  with you  1 of 2 approvals: one more approver of the tenant must sign"
    # One approver needed and nobody signed yet: the lines read as before four eyes.
    assert describe_case(case, signing=Signing(1, "no threshold")) == describe_case(case)
