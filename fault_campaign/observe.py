"""What happened to a case, read black-box through the AWS APIs of the local AWS.

Only the external contract (docs/design.md §8) and the tables' documented items are read: the
executions (DescribeExecution, GetExecutionHistory), the ledger records of the case (a scan by
`case_id`), the case record, the payments, shipments and reservations of the case, the stock
of a SKU, and the escalation queue (drained: the campaign is its only consumer). The campaign's
requests carry a user agent that the DynamoDB nemesis leaves alone. Only when to look is read
in the server's process: whether an execution has closed (`Observer.wait`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.config import Config

from fault_campaign.nemeses import OBSERVER_AGENT
from local_aws.environment import TERMINAL_STATUSES, LocalAws
from saga.dynamodb import from_item


@dataclass
class Snapshot:
    """The case's state at one moment (after an execution closed, before any clock jump)."""

    label: str
    clock: float
    ledger: dict[str, dict[str, Any]]  # operation -> record
    case_record: dict[str, Any] | None
    refunds: list[dict[str, Any]]
    shipments: list[dict[str, Any]]
    reservations: list[dict[str, Any]]
    executions: dict[str, dict[str, Any]]  # arn -> {description, path, errors, ...}
    stock: int | None = None  # the case's SKU, available
    # The account's daily refund counters (docs/design.md §3.12): counter key -> item
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def foreign_request(case: dict[str, Any], operation: str) -> Any:
    """The ledger request of the case's `operation` under another approved revision: the same
    action key, another digest (the `foreign_record` nemesis)."""
    from saga.identity import Operation, action_request
    from saga.models import parse_case

    other = json.loads(json.dumps(case))
    other["approval"]["revision"] = int(other["approval"]["revision"]) + 1
    return action_request(parse_case(other), Operation(operation))


def _deliveries(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The state of every task delivery (TaskScheduled), over the whole history and since the
    last (re)start."""
    state: str | None = None
    every: list[str] = []
    last_run: list[str] = []
    for event in events:
        if "stateEnteredEventDetails" in event:
            state = event["stateEnteredEventDetails"]["name"]
        elif event["type"] == "ExecutionRedriven":
            last_run = []
        elif event["type"] == "TaskScheduled" and state is not None:
            every.append(state)
            last_run.append(state)
    return every, last_run


def _retries_answered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each RETRY the reconcile tool answered: the step it reconciled, and when its delivery
    was scheduled (epoch seconds of the local clock, which history timestamps read)."""
    from fault_campaign.paths import RECONCILE_STATE  # paths imports the runner, which us

    state: str | None = None
    scheduled: float | None = None
    answered: list[dict[str, Any]] = []
    for event in events:
        if "stateEnteredEventDetails" in event:
            state = event["stateEnteredEventDetails"]["name"]
        elif event["type"] == "TaskScheduled":
            scheduled = event["timestamp"].timestamp()
        elif event["type"] == "TaskSucceeded" and state == RECONCILE_STATE:
            output = json.loads(event["taskSucceededEventDetails"].get("output") or "null")
            payload = output.get("Payload") if isinstance(output, dict) else None
            if isinstance(payload, dict) and payload.get("decision") == "RETRY":
                answered.append({"step": payload.get("step"), "scheduled": scheduled})
    return answered


@dataclass
class Observer:
    """Clients of the local AWS for reading (one set per block: clients are costly to build)."""

    local: LocalAws
    outputs: dict[str, str] = field(init=False)
    ddb: Any = field(init=False)
    sfn: Any = field(init=False)
    sqs: Any = field(init=False)

    def __post_init__(self) -> None:
        self.outputs = self.local.outputs
        config = Config(
            retries={"mode": "standard", "max_attempts": 5}, user_agent_extra=OBSERVER_AGENT
        )
        session: Any = self.local.session
        self.ddb = session.client("dynamodb", endpoint_url=self.local.endpoint, config=config)
        self.sfn = session.client("stepfunctions", endpoint_url=self.local.endpoint, config=config)
        self.sqs = session.client("sqs", endpoint_url=self.local.endpoint, config=config)

    # -- executions -------------------------------------------------------------------------
    def start(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        response: dict[str, Any] = self.sfn.start_execution(
            stateMachineArn=self.outputs["StateMachineArn"], name=name, input=json.dumps(case)
        )
        return response

    def wait(self, arn: str, *, timeout_seconds: float = 300.0) -> dict[str, Any]:
        """DescribeExecution once the execution has closed (or the time ran out). Between the
        looks (after 10 ms, growing to every 50 ms) whether it has closed is read in the
        server's process: a look costs no request (as DescribeExecution polls, they were a
        quarter of a case's requests), and the execution is seen closed at the same moments."""
        deadline = time.monotonic() + timeout_seconds
        delay = 0.01
        while True:
            status = self.local.execution_status(arn)  # None: unknown here, ask the API
            if status in (None, *TERMINAL_STATUSES) or time.monotonic() > deadline:
                description: dict[str, Any] = self.sfn.describe_execution(executionArn=arn)
                if description["status"] in TERMINAL_STATUSES or time.monotonic() > deadline:
                    return description
            time.sleep(delay)
            delay = min(0.05, delay * 1.5)

    def describe(self, arn: str) -> dict[str, Any]:
        """DescribeExecution alone (status, error), for a decision that needs no history."""
        description: dict[str, Any] = self.sfn.describe_execution(executionArn=arn)
        return description

    def execution(self, arn: str) -> dict[str, Any]:
        """The description and what the history says: states entered, task failures, counts."""
        description = self.sfn.describe_execution(executionArn=arn)
        events: list[dict[str, Any]] = []
        for page in self.sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
            events.extend(page["events"])
        path = [
            e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
        ]
        task_errors = [
            e["taskFailedEventDetails"].get("error") for e in events if e["type"] == "TaskFailed"
        ]
        scheduled_states, last_run = _deliveries(events)
        failed_state = path[-1] if path else None
        scheduled = len(scheduled_states)
        tasks_entered = sum(1 for e in events if e["type"] == "TaskStateEntered")
        output = description.get("output")
        return {
            "arn": arn,
            "name": description["name"],
            "status": description["status"],
            "output": json.loads(output) if output else None,
            "error": description.get("error"),
            "cause": description.get("cause"),
            "redrive_count": int(description.get("redriveCount", 0)),
            "path": path,
            "last_state": failed_state,
            "scheduled_states": scheduled_states,
            # deliveries to the last state since the execution last started or was redriven
            "last_run_deliveries": sum(1 for state in last_run if state == failed_state),
            "task_errors": task_errors,
            "invocations": scheduled,
            "retries": max(0, scheduled - tasks_entered),
            "reconciliations": path.count("ReconcileStep"),
            "retries_answered": _retries_answered(events),
        }

    def last_deliveries(self, arn: str) -> dict[str, dict[str, Any]]:
        """The last delivery to each task state of the execution: its Lambda parameters
        (FunctionName, Payload) as Step Functions sent them (TaskScheduled)."""
        state: str | None = None
        found: dict[str, dict[str, Any]] = {}
        for page in self.sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
            for event in page["events"]:
                if "stateEnteredEventDetails" in event:
                    state = event["stateEnteredEventDetails"]["name"]
                elif event["type"] == "TaskScheduled" and state is not None:
                    found[state] = json.loads(event["taskScheduledEventDetails"]["parameters"])
        return found

    def redrive(self, arn: str) -> None:
        self.sfn.redrive_execution(executionArn=arn)

    # -- tables -----------------------------------------------------------------------------
    def _scan_case(self, output_key: str, case_id: str) -> list[dict[str, Any]]:
        return self.scan_all(
            output_key,
            FilterExpression="case_id = :c",
            ExpressionAttributeValues={":c": {"S": case_id}},
        )

    def scan_all(self, output_key: str, **filters: Any) -> list[dict[str, Any]]:
        """Every item of the table (that `filters` keep), every page, consistently read."""
        pages = self.ddb.get_paginator("scan").paginate(
            TableName=self.outputs[output_key], ConsistentRead=True, **filters
        )
        return [from_item(item) for page in pages for item in page.get("Items", [])]

    def ledger(self, case_id: str) -> dict[str, dict[str, Any]]:
        """The case's ledger records by operation (`tenant#operation#action id`, §2)."""
        return {
            str(record["action_key"]).split("#")[1]: record
            for record in self._scan_case("LedgerTableName", case_id)
        }

    def case_record(self, case_id: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(
            TableName=self.outputs["CasesTableName"],
            Key={"case_id": {"S": case_id}},
            ConsistentRead=True,
        ).get("Item")
        return from_item(item) if item else None

    def stock(self, sku: str) -> int | None:
        item = self.ddb.get_item(
            TableName=self.outputs["InventoryTableName"],
            Key={"sku": {"S": sku}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else int(item["available"]["N"])

    def fault_cursor(self, case_id: str, downstream: str) -> int:
        from saga.sandbox.faults import cursor_key  # the sandbox's control table layout

        item = self.ddb.get_item(
            TableName=self.outputs["SandboxTableName"],
            Key={"pk": {"S": cursor_key(case_id, downstream)}},
            ConsistentRead=True,
        ).get("Item")
        return 0 if item is None else int(item["cursor"]["N"])

    def heal(self, case_id: str, faults: dict[str, list[str]]) -> None:
        """The cause goes away: every downstream's remaining faults are skipped (the cursor is
        moved to the end of its list). `unavailable` stays: it is sticky by contract (§8)."""
        from saga.sandbox.faults import cursor_key

        for downstream, names in faults.items():
            if self.fault_cursor(case_id, downstream) >= len(names):
                continue
            self.ddb.update_item(
                TableName=self.outputs["SandboxTableName"],
                Key={"pk": {"S": cursor_key(case_id, downstream)}},
                UpdateExpression="SET #c = :end",
                ExpressionAttributeNames={"#c": "cursor"},
                ExpressionAttributeValues={":end": {"N": str(len(names))}},
            )

    def put_foreign_record(self, case: dict[str, Any], operation: str) -> None:
        """A ledger record of the case's `operation` written by another request (the key used
        before with other parameters: another approved revision), open and held by nobody, as a
        delivery that gave its lease back leaves it (docs/design.md §2: a KeyConflict)."""
        from saga.ledger.items import record_item
        from saga.ledger.records import Attempt, LedgerStatus

        request = foreign_request(case, operation)
        now = self.local.clock.now()
        item = record_item(
            request,
            Attempt("campaign:foreign-request", 0.0),
            now,
            expires_at=None,
            status=LedgerStatus.IN_PROGRESS,
            attempts=1,
            owner=False,
        )
        self.ddb.put_item(TableName=self.outputs["LedgerTableName"], Item=item)

    def give_legacy_retention(self, case_id: str, operation: str) -> bool:
        """The case's `operation` record as the release before the open-record rule (§3.7)
        left records it left open: with a retention (`expires_at`, the ledger's retention from
        now), as its last write gave every record. Only if the record is open; whether it was."""
        from sagactl.config import cdk_config

        record = self.ledger(case_id).get(operation)
        if record is None or record.get("status") not in ("IN_PROGRESS", "UNKNOWN"):
            return False
        retention = int(cdk_config().ledger.retention_days) * 86400
        self.ddb.update_item(
            TableName=self.outputs["LedgerTableName"],
            Key={"action_key": {"S": str(record["action_key"])}},
            UpdateExpression="SET expires_at = :at",
            ExpressionAttributeValues={":at": {"N": str(int(self.local.clock.now()) + retention)}},
        )
        return True

    def drain_queue(self) -> list[dict[str, Any]]:
        """Every message on the escalation queue, removed."""
        url = self.outputs["EscalationQueueUrl"]
        bodies: list[dict[str, Any]] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=30
            ).get("Messages", [])
            if not messages:
                return bodies
            for message in messages:
                bodies.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def snapshot(self, label: str, case_id: str, arns: list[str], sku: str = "") -> Snapshot:
        return Snapshot(
            label=label,
            clock=self.local.clock.now(),
            ledger=self.ledger(case_id),
            case_record=self.case_record(case_id),
            refunds=self._scan_case("PaymentsTableName", case_id),
            shipments=self._scan_case("ShipmentsTableName", case_id),
            reservations=self._scan_case("ReservationsTableName", case_id),
            executions={arn: self.execution(arn) for arn in arns},
            stock=self.stock(sku) if sku else None,
            counters=self.counters(),
        )

    def counters(self) -> dict[str, dict[str, Any]]:
        """Every daily refund counter of the account (a few items), by key."""
        if "LimitsTableName" not in self.outputs:
            return {}
        return {str(c["counter_key"]): c for c in self.scan_all("LimitsTableName")}
