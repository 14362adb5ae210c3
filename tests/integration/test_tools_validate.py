"""ValidateCase against moto: every rejection changes nothing; a re-validation is a no-op."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.tables import StackTables
from saga.cases import OwningExecution
from saga.errors import (
    DUPLICATE_OF_EXECUTION,
    ApprovalMismatch,
    AuthorizationDenied,
    DuplicateExecution,
    InvalidRequest,
    KeyConflict,
    TransientError,
)
from saga.identity import agent_case_id, legacy_agent_case_id
from saga.models import ValidateResult, approval_digest, parse_case
from saga.settings import parse_tenants
from saga.tools.validate import validate_case
from tests import legacy_drafts
from tests.tools_harness import TENANTS_JSON, ToolsEnv, agent_proposal, raw_case, tools_env

TENANTS = parse_tenants(TENANTS_JSON)
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:ReplacementOrder:case-0001"
OWNER = OwningExecution(EXECUTION, "2026-11-30T10:00:00.000Z")


def validate(
    env: ToolsEnv, case: dict[str, Any], execution: OwningExecution = OWNER
) -> ValidateResult:
    return validate_case(
        case,
        tenants=TENANTS,
        cases=env.cases,
        execution=execution,
        approvals=env.approvals,
        ceilings=env.ceilings,
        drafts=env.drafts,
    )


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def test_valid_case_is_recorded_in_progress_with_derived_actions(env: ToolsEnv) -> None:
    result = validate(env, raw_case())
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
    validate(env, raw_case())
    first = env.case_record("case-0001")
    env.clock.advance(60)
    again = validate(env, raw_case())
    assert again.actions.refund.action_key == "acme#refund#case-0001.refund"
    assert env.case_record("case-0001") == first


def test_same_case_id_with_other_approved_parameters_is_a_key_conflict(env: ToolsEnv) -> None:
    validate(env, raw_case())
    other = raw_case(
        refund={"payment_reference": "pay-777", "amount_minor": 9999, "currency": "USD"}
    )
    with pytest.raises(KeyConflict, match="case case-0001 is already recorded"):
        validate(env, other)
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
        validate(env, case)
    assert env.items("CASES_TABLE") == []


def test_tampered_parameters_are_an_approval_mismatch_and_not_recorded(env: ToolsEnv) -> None:
    case = raw_case()
    case["refund"]["amount_minor"] = 200_000  # changed after approval
    with pytest.raises(ApprovalMismatch, match="re-approve"):
        validate(env, case)
    assert env.items("CASES_TABLE") == []


def test_invalid_case_names_the_field_and_is_not_recorded(env: ToolsEnv) -> None:
    case = raw_case()
    case["refund"]["currency"] = "dollars"
    with pytest.raises(InvalidRequest, match=r"^invalid case: refund.currency: "):
        validate(env, case)
    assert env.items("CASES_TABLE") == []


def test_the_owning_executions_retries_and_redrives_pass(env: ToolsEnv) -> None:
    first = validate(env, raw_case())
    assert first.case["case_id"] == "case-0001"
    record = env.case_record("case-0001")
    assert record is not None
    assert (record["execution_arn"], record["execution_started_at"]) == (
        OWNER.arn,
        OWNER.started_at,
    )
    # a Lambda retry or a redrive of the same execution: same ARN, same start time
    again = validate(env, raw_case(), OwningExecution(OWNER.arn, OWNER.started_at))
    assert again.actions == first.actions
    assert env.case_record("case-0001") == record


@pytest.mark.parametrize(
    "newcomer",
    [
        # another execution name (a console start, an agent's retry with a new name)
        OwningExecution(EXECUTION.replace(":case-0001", ":case-0001-again"), "2026-12-01T00:00Z"),
        # the same name once Step Functions has forgotten it (90 days): same ARN, new start
        OwningExecution(EXECUTION, "2027-03-15T09:00:00.000Z"),
    ],
)
def test_a_new_execution_of_a_recorded_case_is_a_duplicate_and_changes_nothing(
    env: ToolsEnv, newcomer: OwningExecution
) -> None:
    validate(env, raw_case())
    record = env.case_record("case-0001")
    env.clock.advance(100 * 86400)
    with pytest.raises(DuplicateExecution) as raised:
        validate(env, raw_case(), newcomer)
    # The workflow's Catch reads the owner's ARN after these words, up to the next space.
    assert f"{DUPLICATE_OF_EXECUTION}{OWNER.arn} " in raised.value.message
    assert env.case_record("case-0001") == record


def test_a_case_table_that_does_not_answer_is_a_transient_error_and_writes_nothing(
    env: ToolsEnv,
) -> None:
    def throttle(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutItem"
        )

    env.client.meta.events.register("before-call.dynamodb.PutItem", throttle)
    try:
        with pytest.raises(TransientError, match="the cases table did not answer"):
            validate(env, raw_case())
    finally:
        env.client.meta.events.unregister("before-call.dynamodb.PutItem", throttle)
    assert env.items("CASES_TABLE") == []


# --- the daily refund ceiling (docs/design.md §3.12) ---------------------------------------------
def with_refund(amount: int, currency: str = "USD", case_id: str = "case-0001") -> dict[str, Any]:
    refund = {"payment_reference": "pay-777", "amount_minor": amount, "currency": currency}
    return raw_case(case_id, refund=refund)


def test_a_refund_above_the_tenants_daily_ceiling_is_refused_for_good(env: ToolsEnv) -> None:
    env.ceilings = {"acme": {"USD": 10_000, "EUR": 5_000}}
    message = (
        "the refund of 100.01 USD (10001 minor units) exceeds tenant acme's daily refund "
        "ceiling for USD, 100.00 USD (10000 minor units): it can never be refunded in one day; "
        "split it into cases within the ceiling, or raise refund_ceilings.acme.USD"
    )
    with pytest.raises(AuthorizationDenied) as refused:
        validate(env, with_refund(10_001))
    assert refused.value.message == message
    assert env.items("CASES_TABLE") == []
    # At the ceiling, and for a tenant without ceilings, the case is accepted.
    validate(env, with_refund(10_000))
    env.ceilings = {"globex": {"USD": 100}}
    validate(env, with_refund(1_000_000, case_id="case-0002"))
    assert len(env.items("CASES_TABLE")) == 2


def test_a_currency_without_a_ceiling_is_refused_for_a_tenant_that_has_ceilings(
    env: ToolsEnv,
) -> None:
    env.ceilings = {"acme": {"EUR": 50_000}}
    with pytest.raises(AuthorizationDenied, match="none for USD: no USD refund may leave"):
        validate(env, with_refund(1))
    assert env.items("CASES_TABLE") == []


def test_a_case_accepted_before_a_ceiling_was_lowered_goes_on(env: ToolsEnv) -> None:
    """Its own execution's redrive of ValidateCase passes (IssueRefund's charge refuses the
    refund then); a new execution of it is still a DUPLICATE, not a rejection."""
    validate(env, with_refund(20_000))
    env.ceilings = {"acme": {"USD": 10_000}}
    again = validate(env, with_refund(20_000), OwningExecution(OWNER.arn, OWNER.started_at))
    assert again.case["refund"]["amount_minor"] == 20_000
    newcomer = OwningExecution(EXECUTION.replace(":case-0001", ":other"), "2026-12-01T00:00Z")
    with pytest.raises(DuplicateExecution):
        validate(env, with_refund(20_000), newcomer)


# --- agent case ids (docs/design.md §10) -------------------------------------------------------
def _acme_draft(env: ToolsEnv, request_id: str) -> str:
    """acme's agent proposed `request_id`: its draft, as the agent tools write it."""
    case_id = agent_case_id("acme", request_id)
    env.drafts.create(
        case_id=case_id,
        tenant_id="acme",
        request_id=request_id,
        digest="sha256:" + "0" * 64,
        parameters={key: raw_case()[key] for key in ("order", "reserve", "refund", "shipment")},
    )
    return case_id


def _old_draft(env: ToolsEnv, tenant: str, ticket: str) -> str:
    """A draft `tenant`'s agent proposed before ids carried the tenant (`agt-` + 32 hex)."""
    return legacy_drafts.propose(
        env.admin, env.names["LEGACY_DRAFTS_TABLE"], tenant, agent_proposal(ticket)
    )


@pytest.mark.parametrize(
    "whose",
    ["ordinary id begun agt-", "old shape, no draft", "agt_ id, no draft", "globex's old draft"],
)
def test_a_new_case_under_an_agents_id_without_its_draft_is_refused_unrecorded(
    env: ToolsEnv, whose: str
) -> None:
    """acme's case under an agent's id that no draft of acme holds: every agent role may read
    the old ids' cases and their executions (§11), so it would show its customer to them."""
    case_id = {
        "ordinary id begun agt-": "agt-2024-0042",
        "old shape, no draft": legacy_agent_case_id("acme", "ticket-9"),
        "agt_ id, no draft": agent_case_id("acme", "ticket-9"),
        "globex's old draft": _old_draft(env, "globex", "9"),
    }[whose]
    _acme_draft(env, "ticket-10")  # another draft of acme's proves nothing for this id
    with pytest.raises(InvalidRequest, match="no draft of tenant acme holds it"):
        validate(env, raw_case(case_id))
    assert env.items("CASES_TABLE") == []


def test_an_agents_draft_starts_under_its_id_old_or_new(env: ToolsEnv) -> None:
    for case_id in (_acme_draft(env, "ticket-11"), _old_draft(env, "acme", "12")):
        assert validate(env, raw_case(case_id)).case["case_id"] == case_id
        record = env.case_record(case_id)
        assert record is not None and record["tenant_id"] == "acme"


def test_a_case_recorded_under_an_agt_id_before_the_rule_goes_on(env: ToolsEnv) -> None:
    """Not new: acme's own case ran under `agt-2024-0042` before ValidateCase asked for a
    draft; its owning execution's retries and redrives still pass, a new execution is its
    DUPLICATE as any case's."""
    case = parse_case(raw_case("agt-2024-0042"))
    env.cases.create(case, approval_digest(case), OWNER, approvals_required=1)
    assert validate(env, raw_case("agt-2024-0042")).case["case_id"] == "agt-2024-0042"
    newcomer = OwningExecution(EXECUTION.replace(":case-0001", ":agt-2024-0042--r1"), "2027")
    with pytest.raises(DuplicateExecution):
        validate(env, raw_case("agt-2024-0042"), newcomer)
