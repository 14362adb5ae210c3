"""The whole saga in the local AWS: the same ASL, the real handlers, the sandbox downstreams.

Each scenario asserts what a person would check after the fact: the execution's path and
status, the effects counted in the sandbox tables, the ledger records, the case record and the
escalation queue. The example case files are the scenarios users run with `sagactl`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from saga.identity import Operation, action_id_for, action_key, request_digest
from saga.ledger import Absent, ActionLedger, ActionRequest, Attempt, EffectResult, LedgerPolicy
from sagactl.bench import count_dynamodb_requests
from sagactl.local.environment import LocalAws
from stacks.config import SagaConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HAPPY_PATH = [
    "ValidateCase",
    "NewOrDuplicate",
    "ReserveStock",
    "IssueRefund",
    "CreateShipment",
    "RecordOutcome",
]


def load_example(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return case


class Saga:
    """Read-only views of one finished case in the local account."""

    def __init__(self, local: LocalAws, case: dict[str, Any]) -> None:
        self.local = local
        self.case = case
        self.case_id: str = case["case_id"]
        self.tenant: str = case["tenant_id"]
        self.ddb = local.client("dynamodb")
        self.description, self.history = local.run_case(case)

    # -- the execution ---------------------------------------------------------------------
    @property
    def status(self) -> str:
        return str(self.description["status"])

    @property
    def output(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.description["output"])
        return out

    @property
    def path(self) -> list[str]:
        """State names in the order they were entered (retries do not re-enter a state)."""
        return [
            e["stateEnteredEventDetails"]["name"]
            for e in self.history
            if "stateEnteredEventDetails" in e
        ]

    def events(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.history if e["type"] == event_type]

    # -- the account -------------------------------------------------------------------------
    def count_effects(self, output_key: str) -> int:
        table = self.local.outputs[output_key]
        items = self.ddb.scan(
            TableName=table,
            FilterExpression="case_id = :c",
            ExpressionAttributeValues={":c": {"S": self.case_id}},
            ConsistentRead=True,
        )["Items"]
        return len(items)

    def ledger(self, operation: Operation) -> dict[str, Any] | None:
        if operation is Operation.RELEASE:
            action_id = action_id_for(self.case_id, Operation.RESERVE)
        else:
            action_id = action_id_for(self.case_id, operation)
        key = action_key(self.tenant, operation, action_id)
        item: dict[str, Any] | None = self.ddb.get_item(
            TableName=self.local.outputs["LedgerTableName"],
            Key={"action_key": {"S": key}},
            ConsistentRead=True,
        ).get("Item")
        return item

    def ledger_status(self, operation: Operation) -> str | None:
        record = self.ledger(operation)
        return None if record is None else str(record["status"]["S"])

    def case_outcome(self) -> str | None:
        item = self.ddb.get_item(
            TableName=self.local.outputs["CasesTableName"],
            Key={"case_id": {"S": self.case_id}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else item.get("outcome", {}).get("S")

    def available(self, sku: str) -> int:
        item = self.ddb.get_item(
            TableName=self.local.outputs["InventoryTableName"],
            Key={"sku": {"S": sku}},
            ConsistentRead=True,
        )["Item"]
        return int(item["available"]["N"])

    def escalations(self) -> list[dict[str, Any]]:
        sqs = self.local.client("sqs")
        messages = sqs.receive_message(
            QueueUrl=self.local.outputs["EscalationQueueUrl"],
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        bodies = [json.loads(m["Body"]) for m in messages]
        return [b for b in bodies if b.get("case_id") == self.case_id]


def complete_under_another_approval(
    local: LocalAws, case: dict[str, Any], operation: Operation, parameters: dict[str, Any]
) -> None:
    """A COMPLETED ledger record for this case's action, but with other parameters (another
    approval's digest): the saga's own delivery of that action is then a KeyConflict."""
    table = local.outputs["LedgerTableName"]
    ledger = ActionLedger(table, local.client("dynamodb"), LedgerPolicy())
    ledger.execute(
        ActionRequest(
            tenant_id=case["tenant_id"],
            operation=operation.value,
            action_id=action_id_for(case["case_id"], operation),
            digest=request_digest(parameters, 1),
            case_id=case["case_id"],
        ),
        Attempt(attempt_id="earlier-approval", remaining_seconds=30),
        effect=lambda: EffectResult(result={"note": "made under another approval"}),
        reconcile=Absent,
    )


@pytest.fixture
def stock_before(local_aws: LocalAws) -> int:
    item = local_aws.client("dynamodb").get_item(
        TableName=local_aws.outputs["InventoryTableName"], Key={"sku": {"S": "SKU-RED-MUG"}}
    )["Item"]
    return int(item["available"]["N"])


def test_happy_path_runs_five_states_with_one_effect_each(
    local_aws: LocalAws, stock_before: int
) -> None:
    with count_dynamodb_requests() as requests:
        saga = Saga(local_aws, load_example("happy-path"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == HAPPY_PATH  # 6 states entered: 7 billed transitions with the start
    assert len(saga.events("TaskScheduled")) == 5  # one Lambda invocation per state
    # Ledger: reserve 1 (one transaction), refund 2, ship 2 (claim + complete); cases table 2
    # (validate, outcome); sandbox downstreams 3 (payment key claim + refund, shipment).
    assert sum(requests.values()) == 10, requests
    assert requests["TransactWriteItems"] == 3
    assert saga.output["outcome"] == "COMPLETED"
    assert saga.output["escalation"] is None
    assert set(saga.output["steps"]) == {"reserve", "refund", "ship"}
    assert saga.count_effects("PaymentsTableName") == 1
    assert saga.count_effects("ShipmentsTableName") == 1
    assert saga.available("SKU-RED-MUG") == stock_before - 1
    for op in (Operation.RESERVE, Operation.REFUND, Operation.SHIP):
        assert saga.ledger_status(op) == "COMPLETED"
    assert saga.ledger(Operation.RELEASE) is None
    assert saga.case_outcome() == "COMPLETED"
    assert saga.escalations() == []


def test_lost_refund_response_is_reconciled_not_repeated(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("lost-refund-response"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "IssueRefund",
        "ReconcileStep",
        "AfterReconcile",
        "CreateShipment",
        "RecordOutcome",
    ]
    assert saga.output["outcome"] == "COMPLETED"
    assert saga.output["steps"]["refund"]["reconciled"] is True
    assert saga.count_effects("PaymentsTableName") == 1
    assert saga.count_effects("ShipmentsTableName") == 1
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["status"]["S"] == "COMPLETED"
    assert refund["downstream_ref"]["S"] == saga.output["steps"]["refund"]["downstream_ref"]
    assert saga.case_outcome() == "COMPLETED"


def test_lost_carrier_response_never_ships_twice(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("lost-carrier-response"))

    assert saga.status == "SUCCEEDED"
    assert "ReconcileStep" in saga.path
    assert saga.path[-1] == "RecordOutcome"
    assert saga.output["outcome"] == "COMPLETED"
    assert saga.count_effects("ShipmentsTableName") == 1
    assert saga.ledger_status(Operation.SHIP) == "COMPLETED"


def test_refund_rejected_releases_the_reservation_and_escalates(
    local_aws: LocalAws, stock_before: int
) -> None:
    saga = Saga(local_aws, load_example("refund-rejected"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "IssueRefund",
        "ReleaseReservation",
        "Escalate",
        "RecordOutcome",
    ]
    assert saga.output["outcome"] == "ESCALATED"
    assert saga.output["escalation"]["reason"] == "REFUND_REJECTED"
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.count_effects("ShipmentsTableName") == 0
    assert saga.available("SKU-RED-MUG") == stock_before
    assert saga.ledger_status(Operation.REFUND) == "FAILED"
    assert saga.ledger_status(Operation.RELEASE) == "COMPLETED"
    assert saga.case_outcome() == "ESCALATED"
    assert len(saga.escalations()) == 1


def test_shipment_rejected_keeps_the_refund_releases_stock_and_escalates_once(
    local_aws: LocalAws, stock_before: int
) -> None:
    saga = Saga(local_aws, load_example("shipment-rejected"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == [*HAPPY_PATH[:5], "ReleaseReservation", "Escalate", "RecordOutcome"]
    assert saga.output["outcome"] == "ESCALATED"
    assert [c["action_key"] for c in saga.output["compensations"]] == [
        action_key("acme", Operation.RELEASE, action_id_for(saga.case_id, Operation.RESERVE))
    ]
    assert saga.count_effects("PaymentsTableName") == 1  # the refund is kept, never reversed
    assert saga.count_effects("ShipmentsTableName") == 0
    assert saga.available("SKU-RED-MUG") == stock_before  # reserved once, released once
    assert saga.ledger_status(Operation.SHIP) == "FAILED"
    assert saga.ledger_status(Operation.RELEASE) == "COMPLETED"
    assert saga.case_outcome() == "ESCALATED"
    messages = saga.escalations()
    assert len(messages) == 1
    assert messages[0]["reason"] == "SHIPMENT_REJECTED"
    assert messages[0]["compensated"] == saga.output["compensations"][0]["action_key"]
    refund_key = saga.output["steps"]["refund"]["action_key"]
    assert refund_key in [e["action_key"] for e in messages[0]["confirmed_effects"]]


def test_out_of_stock_escalates_with_nothing_to_compensate(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("out-of-stock"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "Escalate",
        "RecordOutcome",
    ]
    assert saga.output["outcome"] == "ESCALATED"
    assert saga.output["escalation"]["reason"] == "OUT_OF_STOCK"
    assert saga.output["compensations"] == []
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.ledger_status(Operation.RESERVE) == "FAILED"
    assert len(saga.escalations()) == 1


def test_carrier_unavailable_escalates_with_the_shipment_unknown(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("carrier-unavailable"))

    assert saga.status == "SUCCEEDED"
    assert saga.path[-4:] == ["ReconcileStep", "AfterReconcile", "Escalate", "RecordOutcome"]
    assert saga.output["outcome"] == "ESCALATED"
    assert saga.output["escalation"]["reason"] == "OUTCOME_UNCERTAIN"
    assert saga.output["escalation"]["step"] == "ship"
    assert saga.output["compensations"] == []  # the shipment may exist: nothing is undone
    assert saga.count_effects("PaymentsTableName") == 1
    assert saga.count_effects("ShipmentsTableName") == 0
    assert saga.ledger_status(Operation.SHIP) == "UNKNOWN"
    assert saga.case_outcome() == "ESCALATED"
    assert len(saga.escalations()) == 1


def test_rejected_case_fails_with_a_readable_cause_and_no_effect(local_aws: LocalAws) -> None:
    case = load_example("happy-path")
    case["refund"]["amount_minor"] = 999_999  # not what was approved
    saga = Saga(local_aws, case)

    assert saga.status == "FAILED"
    assert saga.path == ["ValidateCase", "RejectCase"]
    failed = saga.events("ExecutionFailed")[0]["executionFailedEventDetails"]
    assert failed["error"] == "ApprovalMismatch"
    assert "approval" in failed["cause"].lower()
    assert "Traceback" not in failed["cause"]
    assert saga.case_outcome() is None
    for op in (Operation.RESERVE, Operation.REFUND, Operation.SHIP):
        assert saga.ledger(op) is None


def test_stuck_compensation_fails_at_the_task_then_a_redrive_restores_stock_once(
    local_aws: LocalAws, stock_before: int
) -> None:
    saga = Saga(local_aws, load_example("compensation-stuck"))

    # The compensation ran out of retries: FAILED at that task (redrivable), not caught.
    assert saga.status == "FAILED"
    assert saga.path[-1] == "ReleaseReservation"
    failed = saga.events("ExecutionFailed")[0]["executionFailedEventDetails"]
    # No answer from the inventory may hide a release: unknown, never "nothing happened".
    assert failed["error"] == "OutcomeUnknown"
    assert saga.case_outcome() == "COMPENSATION_PENDING"
    assert saga.available("SKU-RED-MUG") == stock_before - 1  # still reserved
    release = saga.ledger(Operation.RELEASE)
    assert release is not None and release["status"]["S"] != "COMPLETED"
    attempts_before = int(release["attempts"]["N"])

    # Redrive reruns the failed state with its input: same action keys, retry counters reset.
    scheduled = [
        e
        for e in saga.events("TaskScheduled")
        if "ReleaseReservation" in e["taskScheduledEventDetails"]["parameters"]
    ]
    parameters = json.loads(scheduled[-1]["taskScheduledEventDetails"]["parameters"])
    payload = dict(parameters["Payload"])
    lam = local_aws.client("lambda")
    outcomes = []
    for retry in range(4):
        payload["attempt"] = {**payload["attempt"], "redrive": 1, "retry": retry}
        response = lam.invoke(
            FunctionName=parameters["FunctionName"], Payload=json.dumps(payload).encode()
        )
        body = json.loads(response["Payload"].read())
        outcomes.append(response.get("FunctionError") and body["errorType"])
        if not response.get("FunctionError"):
            break
    assert outcomes[-1] is None, outcomes  # the redriven compensation finished
    assert saga.available("SKU-RED-MUG") == stock_before  # restored exactly once

    # A second redrive of the same step replays the recorded result: no second restore.
    payload["attempt"] = {**payload["attempt"], "redrive": 2, "retry": 0}
    again = lam.invoke(
        FunctionName=parameters["FunctionName"], Payload=json.dumps(payload).encode()
    )
    assert not again.get("FunctionError")
    assert json.loads(again["Payload"].read())["replayed"] is True
    assert saga.available("SKU-RED-MUG") == stock_before

    release = saga.ledger(Operation.RELEASE)
    assert release is not None and release["status"]["S"] == "COMPLETED"
    context = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    budget = SagaConfig.from_mapping(context).ledger.attempt_budget
    assert attempts_before < int(release["attempts"]["N"]) <= budget


def test_rejection_after_a_reservation_releases_it_and_escalates(
    local_aws: LocalAws, stock_before: int
) -> None:
    """A key conflict at the refund (its key already holds other parameters) comes after the
    reservation: failing as a plain rejection would leave stock held and claim nothing was
    done, so the reservation is released and a person decides."""
    case = load_example("happy-path")
    refund_key = action_key(
        "acme", Operation.REFUND, action_id_for(case["case_id"], Operation.REFUND)
    )
    complete_under_another_approval(local_aws, case, Operation.REFUND, {"amount_minor": 1})

    saga = Saga(local_aws, case)

    assert saga.status == "SUCCEEDED"
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "IssueRefund",
        "ReleaseReservation",
        "Escalate",
        "RecordOutcome",
    ]
    assert saga.output["outcome"] == "ESCALATED"
    escalation = saga.output["escalation"]
    assert (escalation["reason"], escalation["step"], escalation["error"]) == (
        "REJECTED_AFTER_EFFECTS",
        "refund",
        "KeyConflict",
    )
    assert saga.available("SKU-RED-MUG") == stock_before  # released
    assert escalation["decision_needed"].startswith("The reservation was released. ")
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.count_effects("ShipmentsTableName") == 0
    refund = saga.ledger(Operation.REFUND)
    assert refund is not None and refund["request_digest"]["S"] != ""
    assert refund["owner"]["S"].startswith("earlier-approval")  # untouched by the conflict
    assert refund_key == refund["action_key"]["S"]
    assert saga.case_outcome() == "ESCALATED"
    assert len(saga.escalations()) == 1


def test_rejection_at_the_shipment_with_a_shipment_on_record_keeps_stock_and_says_so(
    local_aws: LocalAws, stock_before: int
) -> None:
    """A key conflict at the shipment whose key already holds a COMPLETED shipment (other
    parameters): the release is blocked (the stock may have shipped), so neither the execution
    output nor the escalation message may tell the person that the reservation was released."""
    case = load_example("happy-path")
    complete_under_another_approval(local_aws, case, Operation.SHIP, {"address": "elsewhere"})

    saga = Saga(local_aws, case)

    assert saga.status == "SUCCEEDED"
    assert saga.path == [
        "ValidateCase",
        "NewOrDuplicate",
        "ReserveStock",
        "IssueRefund",
        "CreateShipment",
        "ReleaseReservation",
        "Escalate",
        "RecordOutcome",
    ]
    assert saga.available("SKU-RED-MUG") == stock_before - 1  # kept: it may have shipped
    escalation = saga.output["escalation"]
    assert (escalation["reason"], escalation["step"], escalation["error"]) == (
        "REJECTED_AFTER_EFFECTS",
        "ship",
        "KeyConflict",
    )
    assert "the shipment action is COMPLETED" in escalation["compensation_blocked"]
    assert saga.output["compensations"] == []
    [message] = saga.escalations()
    for decision in (escalation["decision_needed"], message["decision_needed"]):
        assert "reservation is released" not in decision
        assert "NOT released" in decision
    assert saga.case_outcome() == "ESCALATED"
