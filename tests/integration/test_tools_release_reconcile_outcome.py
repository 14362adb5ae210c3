"""ReleaseReservation, ReconcileStep and RecordOutcome against moto: every typed error path."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga.cases import OwningExecution
from saga.errors import (
    ActionSettled,
    KeyConflict,
    OutcomeUnknown,
    OutOfStock,
    RefundRejected,
    ReservationNotHeld,
    ShipmentRejected,
    TransientError,
)
from saga.identity import Operation
from saga.ledger import Absent, Found, LedgerStatus, Undeterminable
from saga.models import AttemptInfo, OutcomePayload
from saga.sandbox.inventory import SandboxInventory
from saga.tools.outcome import record_outcome
from tests.tools_harness import ListFaults, ToolsEnv, make_case, tools_env


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


OWNER = OwningExecution("arn:e")
ATTEMPT = AttemptInfo(execution=OWNER.arn, state="RecordOutcome", retry=0)


class Queue:
    """The escalation queue as RecordOutcome sees it: what was sent, or a send that fails."""

    def __init__(self, *, failing: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.failing = failing

    def send(self, message: Mapping[str, Any]) -> None:
        if self.failing:
            raise TransientError(f"case {message['case_id']}: not queued")
        self.sent.append(dict(message))


# --- release --------------------------------------------------------------------------------
def test_release_restores_stock_once_and_records_its_own_key(env: ToolsEnv) -> None:
    case = make_case(reserve={"sku": "SKU-RED-MUG", "quantity": 4})
    env.reserve(case)
    result = env.release(case)
    assert result.action_key == "acme#release#case-0001.reserve"
    assert env.available("SKU-RED-MUG") == 100
    [reservation] = env.reservations(case.case_id)
    assert reservation["status"]["S"] == "RELEASED"
    assert reservation["released_by"]["S"] == "acme#release#case-0001.reserve"
    record = env.record(result.action_key)
    assert record is not None and record.compensates == "acme#reserve#case-0001.reserve"
    assert env.release(case).replayed and env.available("SKU-RED-MUG") == 100


def test_release_without_a_reservation_is_not_held_and_recorded(env: ToolsEnv) -> None:
    case = make_case()
    with pytest.raises(ReservationNotHeld, match="no reservation"):
        env.release(case)
    with pytest.raises(ReservationNotHeld, match="no reservation"):
        env.release(case)  # the recorded failure, replayed
    record = env.case_record(case.case_id)
    assert record is not None and record["outcome"] == "COMPENSATION_PENDING"


def test_release_after_a_shipment_is_refused(env: ToolsEnv) -> None:
    """The case record says COMPLETED with the shipment: nothing to release."""
    case = make_case()
    env.reserve(case)
    env.create_shipment(case)
    with pytest.raises(ReservationNotHeld, match="the case is COMPLETED"):
        env.release(case)
    assert env.available("SKU-RED-MUG") == 99


def test_release_after_a_shipment_reconciliation_found_is_refused(env: ToolsEnv) -> None:
    """A shipment reconciliation found is COMPLETED in the ledger while the case record is under
    way until RecordOutcome: the ledger's record keeps the stock reserved."""
    case = make_case(faults={"shipment": ["lose_response"]})
    env.reserve(case)
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case)
    assert env.reconcile(case, "ship").decision == "RESUME"
    assert env.case_record(case.case_id)["outcome"] == "IN_PROGRESS"  # type: ignore[index]
    with pytest.raises(ReservationNotHeld, match="shipment action is COMPLETED"):
        env.release(case)
    assert env.available("SKU-RED-MUG") == 99


def test_a_reservation_released_by_another_action_is_refused_before_any_write(
    env: ToolsEnv,
) -> None:
    """Read first, decide, then write: a reservation another action released is refused on
    what the read shows (its status named), with no transaction attempted on it."""
    case = make_case()
    env.reserve(case)
    [reservation] = env.reservations(case.case_id)
    env.client.update_item(
        TableName=env.names["RESERVATIONS_TABLE"],
        Key={"reservation_id": reservation["reservation_id"]},
        UpdateExpression="SET #s = :released, released_by = :other",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":released": {"S": "RELEASED"}, ":other": {"S": "other-key"}},
    )
    with pytest.raises(ReservationNotHeld, match="is RELEASED, not HELD"):
        env.release(case)
    assert env.available("SKU-RED-MUG") == 99
    [after] = env.reservations(case.case_id)
    assert after["released_by"]["S"] == "other-key"


def test_release_after_a_shipment_of_unknown_outcome_is_refused(env: ToolsEnv) -> None:
    """The carrier timed out: the parcel may be on its way, so its stock stays reserved."""
    case = make_case(faults={"shipment": ["timeout"]})
    env.reserve(case)
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case)
    with pytest.raises(ReservationNotHeld, match="shipment action is UNKNOWN"):
        env.release(case)
    assert env.available("SKU-RED-MUG") == 99
    assert [r["status"]["S"] for r in env.reservations(case.case_id)] == ["HELD"]


def test_a_rejected_shipment_does_not_block_the_release(env: ToolsEnv) -> None:
    """The carrier refused the shipment (its action FAILED): nothing shipped, so the stock is
    released (§5.1); only a shipment that may have happened keeps it reserved."""
    case = make_case(faults={"shipment": ["reject"]})
    env.reserve(case)
    with pytest.raises(ShipmentRejected):
        env.create_shipment(case)
    ship = env.record(f"acme#ship#{case.case_id}.ship")
    assert ship is not None and ship.status is LedgerStatus.FAILED
    result = env.release(case)
    assert not result.replayed
    assert env.available("SKU-RED-MUG") == 100
    assert [r["status"]["S"] for r in env.reservations(case.case_id)] == ["RELEASED"]


def test_release_reject_fault_is_permanent(env: ToolsEnv) -> None:
    case = make_case()
    env.reserve(case)
    with pytest.raises(ReservationNotHeld, match="reject"):
        env.release(case, faults=ListFaults("reject"))
    assert env.available("SKU-RED-MUG") == 99


def test_release_reconcile_answers(env: ToolsEnv) -> None:
    from saga.tools.release import reconcile_release

    case = make_case()
    env.reserve(case)
    assert isinstance(reconcile_release(case, inventory=env.inventory), Absent)
    env.release(case)
    found = reconcile_release(case, inventory=env.inventory)
    assert isinstance(found, Found) and found.result["status"] == "RELEASED"
    failed = reconcile_release(
        case,
        inventory=SandboxInventory.for_case(
            env.inventory, ListFaults("timeout"), case, Operation.RELEASE
        ),
    )
    assert isinstance(failed, Undeterminable)


# --- reconcile --------------------------------------------------------------------------------


def test_reconcile_resume_retry_escalate(env: ToolsEnv) -> None:
    case = make_case()
    nothing = env.reconcile(case, "reserve")
    assert (nothing.decision, nothing.attempts, nothing.budget) == ("RETRY", 0, 5)
    env.reserve(case)
    done = env.reconcile(case, "reserve", lookup=Absent)
    assert done.decision == "RESUME" and done.result is not None and done.result.replayed
    assert done.result.result["reservation_id"] == "acme#reserve#case-0001.reserve"
    unclear = env.reconcile(case, "refund", lookup=lambda: Undeterminable("provider down"))
    assert unclear.decision == "ESCALATE" and "provider down" in unclear.reason
    record = env.record("acme#refund#case-0001.refund")
    assert record is not None and record.status is LedgerStatus.UNKNOWN


def test_reconcile_of_a_recorded_failure_raises_the_business_error(env: ToolsEnv) -> None:
    case = make_case(reserve={"sku": "SKU-EMPTY", "quantity": 1}, faults={"refund": ["reject"]})
    with pytest.raises(OutOfStock):
        env.reserve(case)
    with pytest.raises(OutOfStock, match="SKU-EMPTY"):
        env.reconcile(case, "reserve", lookup=Absent)
    with pytest.raises(RefundRejected):
        env.issue_refund(case)
    with pytest.raises(RefundRejected):
        env.reconcile(case, "refund")
    assert env.refunds(case.case_id) == 0


# --- outcome ----------------------------------------------------------------------------------
def _escalated(case: Any) -> OutcomePayload:
    steps = {
        "reserve": {
            "action_key": "k",
            "status": "COMPLETED",
            "downstream_ref": None,
            "result": {"quantity": 1},
            "replayed": False,
            "reconciled": False,
            "attempts": 1,
        }
    }
    escalation = {
        "reason": "SHIPMENT_REJECTED",
        "step": "ship",
        "detail": "no",
        "decision_needed": "x",
    }
    return OutcomePayload(
        case=case,
        outcome="ESCALATED",
        steps=steps,
        compensations=[{"action_key": "r"}],
        escalation=escalation,
        attempt=ATTEMPT,
    )


def test_record_outcome_writes_the_terminal_record_then_queues_the_escalation(
    env: ToolsEnv,
) -> None:
    case = make_case()
    env.cases.create(case, case.approval.digest, OWNER, approvals_required=1)
    payload = _escalated(case)
    queue = Queue()
    output = record_outcome(payload, cases=env.cases, execution_arn=OWNER.arn, escalations=queue)
    assert output.model_dump() == {
        "case_id": "case-0001",
        "outcome": "ESCALATED",
        "steps": payload.steps,
        "compensations": [{"action_key": "r"}],
        "escalation": payload.escalation,
    }
    record = env.case_record("case-0001")
    assert record is not None
    assert record["outcome"] == "ESCALATED" and record["steps"] == payload.steps
    assert record["escalation"] == payload.escalation and record["created_at"]
    assert queue.sent == [
        {
            "kind": "CASE_ESCALATED",
            "case_id": "case-0001",
            "tenant_id": case.tenant_id,
            "execution": OWNER.arn,
            "reason": "SHIPMENT_REJECTED",
            "step": "ship",
            "detail": "no",
            "decision_needed": "x",
            "confirmed_effects": [{"action_key": "k", "downstream_ref": None}],
            "compensated": ["r"],
        }
    ]
    # a repeat (a retry whose answer was lost) rewrites the same record and sends again
    record_outcome(payload, cases=env.cases, execution_arn=OWNER.arn, escalations=queue)
    assert env.case_record("case-0001") == record and len(queue.sent) == 2


def test_a_completed_outcome_queues_nothing(env: ToolsEnv) -> None:
    case = make_case()
    env.cases.create(case, case.approval.digest, OWNER, approvals_required=1)
    queue = Queue()
    payload = OutcomePayload(case=case, outcome="COMPLETED", attempt=ATTEMPT)
    record_outcome(payload, cases=env.cases, execution_arn=OWNER.arn, escalations=queue)
    record = env.case_record("case-0001")
    assert record is not None and record["outcome"] == "COMPLETED" and queue.sent == []


def test_an_escalation_not_queued_is_retried_with_the_record_written(env: ToolsEnv) -> None:
    """The record first, then the message: a send that fails is a TransientError (retried, and
    a redrive reruns it) with the case record ESCALATED already."""
    case = make_case()
    env.cases.create(case, case.approval.digest, OWNER, approvals_required=1)
    payload = _escalated(case)
    with pytest.raises(TransientError, match="not queued"):
        record_outcome(
            payload, cases=env.cases, execution_arn=OWNER.arn, escalations=Queue(failing=True)
        )
    record = env.case_record("case-0001")
    assert record is not None and record["outcome"] == "ESCALATED"


def test_no_escalation_is_queued_for_a_case_a_person_resolved(env: ToolsEnv) -> None:
    """The decision is final (docs/design.md §3.10): the record's write is refused with
    ActionSettled before anything is queued, the record keeps the decision."""
    case = make_case()
    env.cases.create(case, case.approval.digest, OWNER, approvals_required=1)
    record = env.cases.get(case.case_id)
    assert record is not None
    env.cases.resolve(
        record, {"by": "ops@acme", "decision": "ticket 77", "at": "2026-11-30T10:00:00Z"}, settle=[]
    )
    resolved = env.case_record("case-0001")
    queue = Queue()
    with pytest.raises(ActionSettled, match="resolved by ops@acme") as refused:
        record_outcome(
            _escalated(case), cases=env.cases, execution_arn=OWNER.arn, escalations=queue
        )
    assert "ticket 77" not in refused.value.message
    assert queue.sent == [] and env.case_record("case-0001") == resolved


def test_record_outcome_for_another_approved_request_under_the_case_id_conflicts(
    env: ToolsEnv,
) -> None:
    env.cases.create(make_case(), make_case().approval.digest, OWNER, approvals_required=1)
    other = make_case(order={"order_id": "ord-9", "customer_id": "cus-42"})
    with pytest.raises(KeyConflict):
        record_outcome(
            OutcomePayload(case=other, outcome="COMPLETED", attempt=ATTEMPT),
            cases=env.cases,
            execution_arn=OWNER.arn,
            escalations=Queue(),
        )
    record = env.case_record("case-0001")
    assert record is not None and record["outcome"] == "IN_PROGRESS"


def test_the_escalation_message_names_every_confirmed_effect_and_nothing_more(
    env: ToolsEnv,
) -> None:
    """A case that escalates after two effects (stock reserved, refund issued; the carrier
    refused the shipment): whoever works the queue must see both effects and where to find them
    (docs/design.md §5), and no effect for the shipment that never happened."""
    case = make_case(faults={"shipment": ["reject"]})
    reserved = env.reserve(case)
    refunded = env.issue_refund(case)
    with pytest.raises(ShipmentRejected):
        env.create_shipment(case)
    assert refunded.downstream_ref and reserved.downstream_ref != refunded.downstream_ref
    steps = {"reserve": reserved.model_dump(), "refund": refunded.model_dump()}
    payload = OutcomePayload(
        case=case,
        outcome="ESCALATED",
        steps=steps,
        compensations=[],
        escalation={
            "reason": "SHIPMENT_REJECTED",
            "step": "ship",
            "detail": "the carrier refused the shipment",
            "decision_needed": "ship another way, or refund the item's cost",
        },
        attempt=ATTEMPT,
    )
    queue = Queue()
    record_outcome(payload, cases=env.cases, execution_arn=OWNER.arn, escalations=queue)

    [message] = queue.sent
    assert message["confirmed_effects"] == [
        {"action_key": "acme#reserve#case-0001.reserve", "downstream_ref": reserved.downstream_ref},
        {"action_key": "acme#refund#case-0001.refund", "downstream_ref": refunded.downstream_ref},
    ]
    assert message["compensated"] == []
    assert (env.refunds(case.case_id), env.shipments(case.case_id)) == (1, 0)
