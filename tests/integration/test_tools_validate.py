"""ValidateCase against moto: every rejection changes nothing; a re-validation is a no-op."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from saga.errors import ApprovalMismatch, AuthorizationDenied, InvalidRequest, KeyConflict
from saga.settings import parse_tenants
from saga.tools.validate import validate_case
from tests.tools_harness import TENANTS_JSON, ToolsEnv, raw_case, tools_env

TENANTS = parse_tenants(TENANTS_JSON)


@pytest.fixture
def env() -> Iterator[ToolsEnv]:
    with tools_env() as tools:
        yield tools


def test_valid_case_is_recorded_in_progress_with_derived_actions(env: ToolsEnv) -> None:
    result = validate_case(raw_case(), tenants=TENANTS, cases=env.cases)
    assert result.actions.reserve.action_key == "acme#reserve#case-0001.reserve"
    assert result.actions.refund.action_key == "acme#refund#case-0001.refund"
    assert result.actions.ship.action_id == "case-0001.ship"
    # the release is tied to the reservation it compensates
    assert result.actions.release.action_key == "acme#release#case-0001.reserve"
    assert result.case["sandbox"] == {"faults": {}}
    record = env.case_record("case-0001")
    assert record is not None
    assert record["outcome"] == "IN_PROGRESS"
    assert record["tenant_id"] == "acme"
    assert record["digest"] == raw_case()["approval"]["digest"]


def test_second_validation_with_same_digest_is_a_no_op(env: ToolsEnv) -> None:
    validate_case(raw_case(), tenants=TENANTS, cases=env.cases)
    first = env.case_record("case-0001")
    env.clock.advance(60)
    again = validate_case(raw_case(), tenants=TENANTS, cases=env.cases)
    assert again.actions.refund.action_key == "acme#refund#case-0001.refund"
    assert env.case_record("case-0001") == first


def test_same_case_id_with_other_approved_parameters_is_a_key_conflict(env: ToolsEnv) -> None:
    validate_case(raw_case(), tenants=TENANTS, cases=env.cases)
    other = raw_case(
        refund={"payment_reference": "pay-777", "amount_minor": 9999, "currency": "USD"}
    )
    with pytest.raises(KeyConflict, match="case case-0001 is already recorded"):
        validate_case(other, tenants=TENANTS, cases=env.cases)
    record = env.case_record("case-0001")
    assert record is not None and record["digest"] == raw_case()["approval"]["digest"]


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        (raw_case(tenant_id="initech"), AuthorizationDenied, "tenant 'initech' is not configured"),
        (
            raw_case(approval={"revision": 1, "approved_by": "intern@acme", "digest": ""}),
            AuthorizationDenied,
            "'intern@acme' may not approve cases for tenant 'acme'",
        ),
        (
            raw_case(approval={"revision": 1, "approved_by": "boss@globex", "digest": ""}),
            AuthorizationDenied,
            "may not approve cases for tenant 'acme'",
        ),
    ],
)
def test_unauthorized_cases_are_denied_and_not_recorded(
    env: ToolsEnv, case: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        validate_case(case, tenants=TENANTS, cases=env.cases)
    assert env.items("CASES_TABLE") == []


def test_tampered_parameters_are_an_approval_mismatch_and_not_recorded(env: ToolsEnv) -> None:
    case = raw_case()
    case["refund"]["amount_minor"] = 200_000  # changed after approval
    with pytest.raises(ApprovalMismatch, match="re-approve"):
        validate_case(case, tenants=TENANTS, cases=env.cases)
    assert env.items("CASES_TABLE") == []


def test_invalid_case_names_the_field_and_is_not_recorded(env: ToolsEnv) -> None:
    case = raw_case()
    case["refund"]["currency"] = "dollars"
    with pytest.raises(InvalidRequest, match=r"^invalid case: refund.currency: "):
        validate_case(case, tenants=TENANTS, cases=env.cases)
    assert env.items("CASES_TABLE") == []
