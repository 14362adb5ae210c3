"""The case model (docs/design.md §8): strict parsing, field-path messages, the approval digest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from saga.errors import ApprovalMismatch, InvalidRequest
from saga.models import (
    AttemptInfo,
    ReconcilePayload,
    approval_digest,
    parse_case,
    parse_model,
    verify_approval,
    with_approval_digest,
)
from tests.tools_harness import BASE_CASE, raw_case


def mutated(path: str, value: Any) -> dict[str, Any]:
    data = raw_case()
    target = data
    *parents, last = path.split(".")
    for name in parents:
        target = target[name]
    target[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("refund.amount_minor", 20.0, "refund.amount_minor"),
        ("refund.amount_minor", "2000", "refund.amount_minor"),
        ("refund.amount_minor", 0, "refund.amount_minor"),
        ("refund.currency", "usd", "refund.currency"),
        ("refund.currency", "USDT", "refund.currency"),
        ("reserve.quantity", -1, "reserve.quantity"),
        ("case_id", "case 1", "case_id"),
        ("case_id", "case#1", "case_id"),
        ("case_id", "x" * 81, "case_id"),
        ("tenant_id", "ac#me", "tenant_id"),
        ("shipment.address.country", "USA", "shipment.address.country"),
        ("approval.digest", "sha256:nothex", "approval.digest"),
        ("approval.revision", 0, "approval.revision"),
        # JSONata numbers are doubles: a larger revision would round on its way through
        ("approval.revision", 2**53, "approval.revision"),
    ],
)
def test_bad_field_is_named_in_invalid_request(path: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=rf"invalid case: {message}:"):
        parse_case(mutated(path, value))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "shipment.address.line1",
            "   ",
            r"shipment.address.line1: Value error, must not be blank",
        ),
        ("shipment.address.name", "\t\n", r"shipment.address.name: Value error, must not be blank"),
        (
            "shipment.address.city",
            "x" * 36,
            "shipment.address.city: Value error, must be at most 35",
        ),
        ("shipment.address.line1", "1 Main St\nApt 2", "shipment.address.line1: .*line breaks"),
        ("shipment.address.postal_code", "12345678901", "shipment.address.postal_code"),
        ("shipment.address.postal_code", "  ", "shipment.address.postal_code: .*blank"),
        ("shipment.address.postal_code", "12345!", "shipment.address.postal_code: .*letters"),
        ("shipment.address.country", "ZZ", "shipment.address.country: .*ISO 3166-1"),
        ("shipment.address.country", "us", "shipment.address.country: .*ISO 3166-1"),
        ("refund.currency", "ABC", "refund.currency: .*ISO 4217"),
        ("refund.currency", "XAU", "refund.currency: .*ISO 4217"),  # gold is not refundable
        ("refund.currency", "HRK", "refund.currency: .*ISO 4217"),  # withdrawn in 2023
    ],
)
def test_what_a_downstream_would_refuse_is_refused_before_any_effect(
    path: str, value: Any, message: str
) -> None:
    """Checked, never rewritten: a case that passes is one every carrier and payment provider
    accepts for format (the refund is never made for a shipment that cannot go out)."""
    with pytest.raises(InvalidRequest, match=rf"^invalid case: {message}"):
        parse_case(mutated(path, value))


def test_unknown_fields_are_refused_with_their_path() -> None:
    data = raw_case()
    data["refund"]["note"] = "x"
    data["extra"] = 1
    with pytest.raises(InvalidRequest) as error:
        parse_case(data)
    assert "refund.note: Extra inputs are not permitted" in error.value.message
    assert "extra: Extra inputs are not permitted" in error.value.message


def test_missing_section_and_non_object_input() -> None:
    data = raw_case()
    del data["shipment"]
    with pytest.raises(InvalidRequest, match="shipment: Field required"):
        parse_case(data)
    with pytest.raises(InvalidRequest, match="expected a JSON object, got list"):
        parse_case([1, 2])


def test_error_message_does_not_echo_input_values() -> None:
    with pytest.raises(InvalidRequest) as error:
        parse_case(mutated("order.customer_id", "secret value with spaces"))
    assert "secret value" not in error.value.message


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ({"payments": ["timeout"]}, "unknown downstream 'payments'"),
        ({"refund": ["explode"]}, "unknown fault 'explode'"),
    ],
)
def test_sandbox_faults_use_the_sandbox_vocabulary(faults: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=rf"sandbox.faults: .*{message}"):
        parse_case(raw_case(faults=faults))


def test_faults_are_optional_and_not_digested() -> None:
    plain = parse_case(raw_case())
    faulty = parse_case(raw_case(faults={"refund": ["lose_response"], "release": ["timeout"]}))
    assert plain.sandbox.faults == {}
    assert faulty.sandbox.faults_for("refund") == ["lose_response"]
    assert approval_digest(plain) == approval_digest(faulty)


def test_digest_covers_every_approved_parameter_and_the_revision() -> None:
    case = parse_case(raw_case())
    digest = approval_digest(case)
    assert digest.startswith("sha256:") and len(digest) == 71
    verify_approval(case)
    for path, value in [
        ("refund.amount_minor", 2001),
        ("reserve.sku", "SKU-BLUE-MUG"),
        ("shipment.address.city", "Shelbyville"),
        ("order.order_id", "ord-2"),
        ("tenant_id", "globex"),
        ("approval.revision", 2),
    ]:
        changed = parse_case(mutated(path, value))
        with pytest.raises(ApprovalMismatch, match="does not match"):
            verify_approval(changed)


def test_digest_of_raw_mapping_equals_digest_of_model_and_ignores_key_order() -> None:
    data = raw_case()
    reordered = dict(reversed(list(copy.deepcopy(data).items())))
    assert approval_digest(data) == approval_digest(parse_case(data)) == approval_digest(reordered)


def test_with_approval_digest_fills_a_missing_digest_and_validates() -> None:
    data = copy.deepcopy(BASE_CASE)
    del data["approval"]["digest"]
    approved = with_approval_digest(data)
    verify_approval(parse_case(approved))
    data["refund"]["amount_minor"] = 1.5
    with pytest.raises(InvalidRequest, match=r"refund\.amount_minor"):
        with_approval_digest(data)


def test_attempt_id_is_per_delivery_and_payload_parses() -> None:
    info = AttemptInfo(execution="arn:x:exec", state="IssueRefund", retry=2, redrive=1)
    assert info.attempt_id("req-9") == "arn:x:exec#IssueRefund#1#2:req-9"
    without_redrive = AttemptInfo(execution="arn:x:exec", state="IssueRefund", retry=0)
    assert without_redrive.attempt_id("r") == "arn:x:exec#IssueRefund#0#0:r"
    payload = parse_model(
        ReconcilePayload,
        {"case": raw_case(), "attempt": info.model_dump(), "step": "ship"},
        what="payload",
    )
    assert payload.step == "ship"
    with pytest.raises(InvalidRequest, match="step: Input should be"):
        parse_model(
            ReconcilePayload,
            {"case": raw_case(), "attempt": info.model_dump(), "step": "release"},
            what="payload",
        )


def test_a_field_the_case_model_refuses_is_named_with_repr_when_not_a_name() -> None:
    """An extra field's name is the caller's text: quoted with repr, so a control sequence in it
    reaches an operator's terminal (the execution's cause) written out."""
    case = {**raw_case(), "\x1b[2J\u202e": 1, "note": 2}
    with pytest.raises(InvalidRequest) as refused:
        parse_case(case)
    message = str(refused.value)
    assert "'\\x1b[2J\\u202e': Extra inputs are not permitted" in message
    assert "note: Extra inputs are not permitted" in message  # a name stays as it is
    assert "\x1b" not in message and "\u202e" not in message
