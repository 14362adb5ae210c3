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

from local_aws.environment import LocalAws
from saga.identity import Operation, action_id_for, action_key, request_digest
from saga.ledger import Absent, ActionLedger, ActionRequest, Attempt, EffectResult, LedgerPolicy
from saga.sandbox.faults import cursor_key
from saga_bench.metering import count_dynamodb_requests
from stacks.config import SagaConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HAPPY_PATH = ["ValidateCase", "ReserveStock", "IssueRefund", "CreateShipment"]
# How an escalated case ends, and the two places a reservation is released before it.
ESCALATED_END = ["Escalate"]  # RecordOutcome invoked there: the record, then the message
RELEASED_AT_REFUND = [*HAPPY_PATH[:3], "ReleaseReservation", *ESCALATED_END]
RELEASED_AT_SHIPMENT = [*HAPPY_PATH, "ReleaseReservation", *ESCALATED_END]


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

    @classmethod
    def of(cls, local: LocalAws, case: dict[str, Any], arn: str) -> Saga:
        """The views of an execution of `case` started (and ended) by the caller."""
        saga = cls.__new__(cls)
        saga.local, saga.case = local, case
        saga.case_id, saga.tenant = case["case_id"], case["tenant_id"]
        saga.ddb = local.client("dynamodb")
        saga.description = local.wait_for_execution(arn)
        saga.history = local.history(arn)
        return saga

    def redrive(self) -> dict[str, Any]:
        """RedriveExecution, then wait for the execution to end again."""
        arn = str(self.description["executionArn"])
        response: dict[str, Any] = self.local.client("stepfunctions").redrive_execution(
            executionArn=arn
        )
        self.description = self.local.wait_for_execution(arn)
        self.history = self.local.history(arn)
        return response

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

    def task_payloads(self, state: str) -> list[dict[str, Any]]:
        """The Lambda payload of every delivery to `state`, in order."""
        payloads = []
        for event in self.events("TaskScheduled"):
            parameters = json.loads(event["taskScheduledEventDetails"]["parameters"])
            payload = parameters.get("Payload")
            if isinstance(payload, dict) and payload.get("attempt", {}).get("state") == state:
                payloads.append(payload)
        return payloads

    def sandbox_calls(self, downstream: str) -> int:
        """How many calls the sandbox downstream answered for this case (its fault cursor)."""
        item = self.ddb.get_item(
            TableName=self.local.outputs["SandboxTableName"],
            Key={"pk": {"S": cursor_key(self.case_id, downstream)}},
            ConsistentRead=True,
        ).get("Item")
        return 0 if item is None else int(item["cursor"]["N"])

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


def test_happy_path_runs_four_states_with_one_effect_each(
    local_aws: LocalAws, stock_before: int
) -> None:
    with count_dynamodb_requests() as requests:
        saga = Saga(local_aws, load_example("happy-path"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == HAPPY_PATH  # 4 states entered: 5 billed transitions with the start
    assert len(saga.events("TaskScheduled")) == 4  # one Lambda invocation per state
    # Ledger: reserve 1 (one transaction), refund 2 (claim + complete), ship 2 (claim + one
    # transaction: its completion and the case record's COMPLETED); cases table 4 (validate,
    # and one read per forward step: only a case under way moves forward); sandbox downstreams
    # 3 (payment key claim + refund, shipment).
    assert sum(requests.values()) == 12, requests
    assert requests["GetItem"] == 3
    assert requests["TransactWriteItems"] == 4
    assert requests["UpdateItem"] == 1  # the refund's completion
    assert saga.output == {
        "case_id": saga.case_id,
        "outcome": "COMPLETED",
        "steps": saga.output["steps"],
        "compensations": [],
        "escalation": None,
    }
    assert set(saga.output["steps"]) == {"reserve", "refund", "ship"}
    assert saga.output["steps"]["ship"]["downstream_ref"] is not None
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
    assert saga.path == [*HAPPY_PATH[:3], "ReconcileStep", "AfterReconcile", "CreateShipment"]
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
    assert saga.path == RELEASED_AT_REFUND
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
    assert saga.path == RELEASED_AT_SHIPMENT
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
    assert messages[0]["compensated"] == [saga.output["compensations"][0]["action_key"]]
    refund_key = saga.output["steps"]["refund"]["action_key"]
    assert refund_key in [e["action_key"] for e in messages[0]["confirmed_effects"]]


def test_out_of_stock_escalates_with_nothing_to_compensate(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("out-of-stock"))

    assert saga.status == "SUCCEEDED"
    assert saga.path == [*HAPPY_PATH[:2], *ESCALATED_END]
    assert saga.output["outcome"] == "ESCALATED"
    assert saga.output["escalation"]["reason"] == "OUT_OF_STOCK"
    assert saga.output["compensations"] == []
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.ledger_status(Operation.RESERVE) == "FAILED"
    assert len(saga.escalations()) == 1


def test_carrier_unavailable_escalates_with_the_shipment_unknown(local_aws: LocalAws) -> None:
    saga = Saga(local_aws, load_example("carrier-unavailable"))

    assert saga.status == "SUCCEEDED"
    assert saga.path[-3:] == ["ReconcileStep", "AfterReconcile", "Escalate"]
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
    # The stack's EventBridge rule escalates every execution that did not succeed.
    [message] = saga.escalations()
    assert (message["kind"], message["status"], message["error"]) == (
        "EXECUTION_NOT_SUCCEEDED",
        "FAILED",
        "ApprovalMismatch",
    )


def _attempt_budget() -> int:
    context = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    return SagaConfig.from_mapping(context).ledger.attempt_budget


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
    first_run = saga.task_payloads("ReleaseReservation")
    assert [(p["attempt"]["redrive"], p["attempt"]["retry"]) for p in first_run] == [
        (0, retry) for retry in range(attempts_before)
    ]
    entered_before = len(saga.path)

    # Redrive: the execution continues at the failed task, with the same input and variables.
    saga.redrive()

    assert saga.status == "SUCCEEDED"
    assert saga.description["redriveCount"] == 1
    assert saga.path[entered_before:] == ["ReleaseReservation", "Escalate"]
    assert saga.path[:entered_before].count("ReserveStock") == 1  # not rerun
    [redriven] = saga.events("ExecutionRedriven")
    assert redriven["executionRedrivenEventDetails"] == {"redriveCount": 1}
    rerun = saga.task_payloads("ReleaseReservation")[len(first_run) :]
    # Same case, same action keys; RedriveCount 1; the Retry counter starts again at 0.
    assert [(p["attempt"]["redrive"], p["attempt"]["retry"]) for p in rerun] == [
        (1, retry) for retry in range(len(rerun))
    ]
    assert all(p["case"] == first_run[0]["case"] for p in rerun)
    assert saga.output["outcome"] == "ESCALATED"
    assert saga.output["escalation"]["reason"] == "SHIPMENT_REJECTED"  # the variables it had
    assert saga.output["escalation"]["decision_needed"].startswith("The reservation was released.")
    assert saga.case_outcome() == "ESCALATED"
    assert saga.available("SKU-RED-MUG") == stock_before  # restored exactly once
    assert saga.count_effects("PaymentsTableName") == 1  # the refund was not made again
    release = saga.ledger(Operation.RELEASE)
    assert release is not None and release["status"]["S"] == "COMPLETED"
    assert attempts_before < int(release["attempts"]["N"]) <= _attempt_budget()
    kinds = [m["kind"] for m in saga.escalations()]
    assert sorted(kinds) == ["CASE_ESCALATED", "EXECUTION_NOT_SUCCEEDED"]


def test_chained_redrive_counts_redrives_and_stops_at_the_lifetime_budget(
    local_aws: LocalAws, stock_before: int
) -> None:
    """The cause stays: a redrive fails again, and the next one finds the budget spent. Retry
    counters restart with every redrive; the ledger's attempts never do."""
    case = load_example("compensation-stuck")
    budget = _attempt_budget()
    case["sandbox"]["faults"]["release"] = ["timeout"] * budget  # never answers within budget
    saga = Saga(local_aws, case)
    assert saga.status == "FAILED"
    per_run = saga.sandbox_calls("release")
    assert 2 * per_run == budget  # two runs of the Retry policy spend the budget exactly

    saga.redrive()
    assert (saga.status, saga.description["redriveCount"]) == ("FAILED", 1)
    assert saga.sandbox_calls("release") == 2 * per_run

    saga.redrive()  # Step Functions allows it; the ledger does not dispatch again
    assert (saga.status, saga.description["redriveCount"]) == ("FAILED", 2)
    assert saga.description["error"] == "BudgetExhausted"
    assert saga.path[-1] == "ReleaseReservation"
    assert [
        e["executionRedrivenEventDetails"]["redriveCount"] for e in saga.events("ExecutionRedriven")
    ] == [1, 2]
    redrives = [p["attempt"]["redrive"] for p in saga.task_payloads("ReleaseReservation")]
    assert redrives == [0] * per_run + [1] * per_run + [2]
    # Past the budget nothing is sent: one lookup (it has no effect) finds no release.
    assert saga.sandbox_calls("release") == budget + 1
    release = saga.ledger(Operation.RELEASE)
    assert release is not None and int(release["attempts"]["N"]) == budget
    assert saga.available("SKU-RED-MUG") == stock_before - 1  # still reserved: a person decides
    assert saga.case_outcome() == "COMPENSATION_PENDING"
    rule_messages = [m for m in saga.escalations() if m["kind"] == "EXECUTION_NOT_SUCCEEDED"]
    assert [m["error"] for m in rule_messages] == [
        "OutcomeUnknown",  # no answer may hide a release: unknown, never "nothing happened"
        "OutcomeUnknown",
        "BudgetExhausted",
    ]


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
    assert saga.path == RELEASED_AT_REFUND
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
    assert saga.path == RELEASED_AT_SHIPMENT
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
