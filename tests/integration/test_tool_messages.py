"""Error messages a person reads (execution cause, escalation detail): each says once which
action it is about and what happened, without the layers repeating one another."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_aws.tables import StackTables
from saga.errors import OutcomeUnknown, TransientError
from saga.tools.refund import reconcile_refund
from tests.tools_harness import Delivery, ToolsEnv, make_case, tools_env


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def test_lost_refund_response_says_once_what_was_lost(env: ToolsEnv) -> None:
    case = make_case(faults={"refund": ["lose_response"]})
    with pytest.raises(OutcomeUnknown) as raised:
        env.issue_refund(case)
    assert raised.value.message == (
        "refund acme#refund#case-0001.refund: outcome unknown: the response from refund was "
        "lost (sandbox fault: lose_response)"
    )


def test_carrier_messages_name_the_action_once(env: ToolsEnv) -> None:
    case = make_case(faults={"shipment": ["fail_before_commit", "unavailable"]})
    deliveries = Delivery("CreateShipment", case.case_id)
    with pytest.raises(TransientError) as transient:
        env.create_shipment(case, deliveries.next())
    assert transient.value.message == (
        "shipment acme#ship#case-0001.ship not dispatched: shipment failed before committing "
        "anything (sandbox fault)"
    )
    with pytest.raises(OutcomeUnknown) as unknown:
        env.create_shipment(case, deliveries.next())
    assert unknown.value.message == (
        "shipment acme#ship#case-0001.ship: outcome unknown: shipment is unavailable "
        "(sandbox fault)"
    )
    answer = env.reconcile(case, "ship")
    assert answer.decision == "ESCALATE"
    assert answer.reason == (
        "outcome cannot be determined: shipment lookup for case-0001.ship got no answer: "
        "shipment is unavailable (sandbox fault)"
    )


def test_refund_lookup_without_answer_is_readable(env: ToolsEnv) -> None:
    case = make_case(faults={"refund": ["timeout"]})
    answer = reconcile_refund("case-0001.refund", env.provider(case))
    assert getattr(answer, "reason", None) == (
        "refund lookup for case-0001.refund got no answer: no response from refund "
        "(sandbox fault: timeout)"
    )
