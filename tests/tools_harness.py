"""Test support for the saga's tools: approved cases, moto tables, and effect counters.

The tables are the stack's own, created from its synthesized template (tests/tables.py).
Effects are counted where they land: refunds and shipments are items in the sandbox payments /
shipments tables (one item per business effect, each carrying `case_id`), stock is the inventory
item's `available`. "Exactly once" in a tools test means exactly one such item.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws

from local_aws.approval_keys import create_local_key, local_key_arn, sign_locally
from local_aws.tables import StackTables
from saga.agent.drafts import DraftStore
from saga.approval_keys import KmsPublicKeys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.aws import dynamodb_client, kms_client
from saga.cases import CaseRecords, OwningExecution
from saga.ceilings import DailyCharge, counter_key, daily_charge
from saga.dynamodb import from_item
from saga.identity import Operation, action_id_for
from saga.inventory import InventoryTables
from saga.ledger import ActionLedger, Attempt, LedgerPolicy, LedgerRecord, Reconciliation
from saga.models import Case, ReconcileResult, Step, StepResult, approval_digest, parse_case
from saga.ports.carrier import Carrier
from saga.ports.inventory import Inventory
from saga.ports.payments import PaymentProvider
from saga.sandbox.carrier import SandboxCarrier
from saga.sandbox.faults import FaultInjector, FaultSource, NoFaults
from saga.sandbox.inventory import DEFAULT_STOCK, SandboxInventory, seed_inventory
from saga.sandbox.payment_keys import PAYMENT_KEY_RETENTION_SECONDS
from saga.sandbox.payment_provider import SandboxPaymentProvider
from saga.tools.reconcile import reconcile_action
from saga.tools.refund import issue_refund, reconcile_refund
from saga.tools.release import release_reservation
from saga.tools.reserve import reconcile_reserve, reserve_stock
from saga.tools.ship import create_shipment, reconcile_shipment
from tests.integration.ledger_harness import FakeClock
from tests.tables import create_by_variable

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:ReplacementOrder:{case_id}"
# The escalation queue as moto SQS names it (account 123456789012, us-east-1).
ESCALATION_QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/escalations"
TABLE_NAMES = {
    "LEDGER_TABLE": "t-ledger",
    "CASES_TABLE": "t-cases",
    "DRAFTS_TABLE": "t-drafts",
    "LEGACY_DRAFTS_TABLE": "t-legacy-drafts",
    "INVENTORY_TABLE": "t-inventory",
    "RESERVATIONS_TABLE": "t-reservations",
    "PAYMENTS_TABLE": "t-payments",
    "SHIPMENTS_TABLE": "t-shipments",
    "SANDBOX_TABLE": "t-sandbox",
    "LIMITS_TABLE": "t-limits",
}
STOCK = DEFAULT_STOCK
TENANTS = {
    "acme": ["supervisor@acme"],
    "globex": ["boss@globex"],
    "hooli": ["controller@hooli", "cfo@hooli"],
}
TENANTS_JSON = json.dumps(TENANTS)
# Four eyes (saga.four_eyes): hooli's refunds above 1000.00 USD, and in any other currency.
THRESHOLDS = {"hooli": {"USD": 100_000}}
# Each approver's local key (local_aws.approval_keys), as the stack's APPROVAL_KEYS names it.
APPROVAL_KEYS_JSON = json.dumps(
    {
        tenant: {approver: {"current": local_key_arn(tenant, approver)} for approver in approvers}
        for tenant, approvers in TENANTS.items()
    }
)

SIGNED_AT = "2026-11-30T00:00:00Z"
ADDRESS = {
    "name": "Ada Li",
    "line1": "1 Main St",
    "city": "Springfield",
    "postal_code": "12345",
    "country": "US",
}
BASE_CASE: dict[str, Any] = {
    "case_id": "case-0001",
    "tenant_id": "acme",
    "order": {"order_id": "ord-1001", "customer_id": "cus-42"},
    "reserve": {"sku": "SKU-RED-MUG", "quantity": 1},
    "refund": {"payment_reference": "pay-777", "amount_minor": 2000, "currency": "USD"},
    "shipment": {"address": ADDRESS},
    "approval": {"revision": 1, "approved_by": "supervisor@acme", "digest": ""},
}


def raw_case(
    case_id: str = "case-0001", *, faults: dict[str, list[str]] | None = None, **overrides: Any
) -> dict[str, Any]:
    """An approved raw case, signed by its approver's local key; `overrides` replace top-level
    sections before approval."""
    data = copy.deepcopy(BASE_CASE)
    data["case_id"] = case_id
    data.update(copy.deepcopy(overrides))
    if faults is not None:
        data["sandbox"] = {"faults": faults}
    return sign_locally(data, signed_at=SIGNED_AT)


def agent_proposal(ticket: str) -> dict[str, Any]:
    """What an agent proposes for support ticket `ticket` (propose_replacement's arguments): one
    red mug again, 20 USD back, to ADDRESS."""
    return {
        "request_id": f"ticket-{ticket}:replacement",
        "order_id": f"ord-{ticket}",
        "customer_id": "cus-7",
        "sku": "SKU-RED-MUG",
        "quantity": 1,
        "payment_reference": f"pay-{ticket}",
        "amount_minor": 2000,
        "currency": "USD",
        "address": dict(ADDRESS),
    }


def make_case(
    case_id: str = "case-0001", *, faults: dict[str, list[str]] | None = None, **overrides: Any
) -> Case:
    return parse_case(raw_case(case_id, faults=faults, **overrides))


class ListFaults:
    """A fault source for unit tests: hands out the listed faults, then None."""

    def __init__(self, *faults: str) -> None:
        self.remaining = list(faults)
        self.drawn = 0

    def next(self) -> str | None:
        self.drawn += 1
        return self.remaining.pop(0) if self.remaining else None


@dataclass
class Delivery:
    """Numbered deliveries of one task: each is a distinct attempt (lease owner)."""

    state: str
    case_id: str
    remaining_seconds: float = 30.0
    count: int = 0

    def next(self) -> Attempt:
        self.count += 1
        return Attempt(
            attempt_id=f"{EXECUTION.format(case_id=self.case_id)}#{self.state}#0#{self.count}:"
            f"req-{self.count}",
            remaining_seconds=self.remaining_seconds,
        )


@dataclass
class ToolsEnv:
    """Every table a tool touches, in moto, with the ledger on a fake clock."""

    client: Any  # the tools' own client (saga.aws: the trimmed model of what they call)
    admin: Any  # botocore's whole DynamoDB model: creates the tables, scans what tools wrote
    clock: FakeClock
    policy: LedgerPolicy
    names: dict[str, str] = field(default_factory=lambda: dict(TABLE_NAMES))
    # The daily refund ceilings (saga.ceilings): none unless a test sets them.
    ceilings: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def ledger(self) -> ActionLedger:
        return ActionLedger(self.names["LEDGER_TABLE"], self.client, self.policy, clock=self.clock)

    @property
    def inventory(self) -> InventoryTables:
        return InventoryTables(
            self.client,
            self.names["INVENTORY_TABLE"],
            self.names["RESERVATIONS_TABLE"],
            clock=self.clock,
        )

    @property
    def approvals(self) -> ApprovalVerifier:
        """The verifier the tools get, with APPROVAL_KEYS_JSON's keys (in moto's KMS)."""
        return ApprovalVerifier(
            parse_trusted_keys(APPROVAL_KEYS_JSON),
            KmsPublicKeys(kms_client),
            function="tests",
            thresholds=THRESHOLDS,
        )

    @property
    def cases(self) -> CaseRecords:
        return CaseRecords(self.client, self.names["CASES_TABLE"], clock=self.clock)

    @property
    def drafts(self) -> DraftStore:
        return DraftStore(
            self.client,
            self.names["DRAFTS_TABLE"],
            legacy_table_name=self.names["LEGACY_DRAFTS_TABLE"],
            clock=self.clock,
        )

    def faults(self, case: Case, downstream: str) -> FaultSource:
        faults = case.sandbox.faults_for(downstream)
        if not faults:
            return NoFaults()
        return FaultInjector(
            self.client,
            self.names["SANDBOX_TABLE"],
            case.case_id,
            downstream,
            faults,
            clock=self.clock,
        )

    def provider(self, case: Case, *, key_retention_seconds: int = 86400) -> SandboxPaymentProvider:
        return SandboxPaymentProvider.create(
            self.client,
            payments_table=self.names["PAYMENTS_TABLE"],
            sandbox_table=self.names["SANDBOX_TABLE"],
            case_id=case.case_id,
            faults=case.sandbox.faults_for("refund"),
            key_retention_seconds=key_retention_seconds,
            clock=self.clock,
        )

    def carrier(self, case: Case) -> SandboxCarrier:
        return SandboxCarrier.create(
            self.client,
            shipments_table=self.names["SHIPMENTS_TABLE"],
            sandbox_table=self.names["SANDBOX_TABLE"],
            case_id=case.case_id,
            faults=case.sandbox.faults_for("shipment"),
            clock=self.clock,
        )

    # --- the tools, as the workflow delivers them: a fresh delivery unless `attempt` is given ---
    def reserve(
        self, case: Case, attempt: Attempt | None = None, *, faults: FaultSource | None = None
    ) -> StepResult:
        """ReserveStock, without faults unless `faults` is given."""
        inventory: Inventory = self.inventory
        if faults is not None:
            inventory = SandboxInventory.for_case(inventory, faults, case, Operation.RESERVE)
        return reserve_stock(
            case,
            attempt or Delivery("ReserveStock", case.case_id).next(),
            execution_arn="arn:e",
            ledger=self.ledger,
            inventory=inventory,
        )

    def issue_refund(
        self,
        case: Case,
        attempt: Attempt | None = None,
        *,
        provider: PaymentProvider | None = None,
        execution_arn: str = "arn:e",
    ) -> StepResult:
        """IssueRefund, at the sandbox provider with the case's faults unless `provider` is
        given."""
        return issue_refund(
            case,
            attempt or Delivery("IssueRefund", case.case_id).next(),
            execution_arn=execution_arn,
            ledger=self.ledger,
            provider=self.provider(case) if provider is None else provider,
            charge=self.charge(case),
        )

    def charge(self, case: Case) -> DailyCharge | None:
        """The case's refund as `ceilings` charges it (as Runtime.refund_charge builds it)."""
        return daily_charge(
            self.ceilings,
            tenant_id=case.tenant_id,
            currency=case.refund.currency,
            amount_minor=case.refund.amount_minor,
            table_name=self.names["LIMITS_TABLE"],
            retention_seconds=self.policy.retention_seconds,
        )

    def counter(self, tenant_id: str, currency: str, day: str) -> int | None:
        """The daily refund counter's total (None: no counter item)."""
        item = self.admin.get_item(
            TableName=self.names["LIMITS_TABLE"],
            Key={"counter_key": {"S": counter_key(tenant_id, currency, day)}},
            ConsistentRead=True,
        ).get("Item")
        return int(item["total"]["N"]) if item else None

    def create_shipment(
        self, case: Case, attempt: Attempt | None = None, *, carrier: Carrier | None = None
    ) -> StepResult:
        """CreateShipment, at the sandbox carrier with the case's faults unless `carrier` is
        given, for a case ValidateCase accepted (its record is written for "arn:e" unless the
        test wrote one)."""
        if self.admin_case_record(case.case_id) is None:
            self.accept(case)
        return create_shipment(
            case,
            attempt or Delivery("CreateShipment", case.case_id).next(),
            execution_arn="arn:e",
            ledger=self.ledger,
            carrier=self.carrier(case) if carrier is None else carrier,
            cases=self.cases,
        )

    def accept(self, case: Case, execution_arn: str = "arn:e") -> None:
        """The case record ValidateCase writes for the execution that owns the case."""
        owner = self.cases.create(
            case, approval_digest(case), OwningExecution(execution_arn), approvals_required=1
        )
        assert owner == OwningExecution(execution_arn), owner

    def release(
        self, case: Case, attempt: Attempt | None = None, *, faults: FaultSource | None = None
    ) -> StepResult:
        """ReleaseReservation, with the case's release faults unless `faults` is given."""
        return release_reservation(
            case,
            attempt or Delivery("ReleaseReservation", case.case_id).next(),
            execution_arn="arn:e",
            ledger=self.ledger,
            inventory=SandboxInventory.for_case(
                self.inventory,
                faults if faults is not None else self.faults(case, "release"),
                case,
                Operation.RELEASE,
            ),
            cases=self.cases,
        )

    def reconcile(
        self,
        case: Case,
        step: Step,
        attempt: Attempt | None = None,
        *,
        lookup: Callable[[], Reconciliation] | None = None,
    ) -> ReconcileResult:
        """ReconcileStep for `step`: it looks the action up where its effect lands (the case's
        faults apply) unless `lookup` is given."""
        return reconcile_action(
            case,
            step,
            attempt or Delivery("ReconcileStep", case.case_id).next(),
            execution_arn="arn:e",
            ledger=self.ledger,
            reconcile=self._lookup(case, step) if lookup is None else lookup,
        )

    def _lookup(self, case: Case, step: Step) -> Callable[[], Reconciliation]:
        if step == "reserve":
            return lambda: reconcile_reserve(case, inventory=self.inventory)
        if step == "refund":
            ref = action_id_for(case.case_id, Operation.REFUND)
            return lambda: reconcile_refund(ref, self.provider(case))
        ref = action_id_for(case.case_id, Operation.SHIP)
        return lambda: reconcile_shipment(ref, self.carrier(case))

    # --- where effects land ---------------------------------------------------------------------
    def items(self, variable: str, case_id: str | None = None) -> list[dict[str, Any]]:
        response = self.admin.scan(TableName=self.names[variable], ConsistentRead=True)
        items = response["Items"]
        if case_id is not None:
            items = [item for item in items if item.get("case_id", {}).get("S") == case_id]
        return list(items)

    def refunds(self, case_id: str) -> int:
        return len(self.items("PAYMENTS_TABLE", case_id))

    def shipments(self, case_id: str) -> int:
        return len(self.items("SHIPMENTS_TABLE", case_id))

    def available(self, sku: str) -> int:
        item = self.client.get_item(
            TableName=self.names["INVENTORY_TABLE"], Key={"sku": {"S": sku}}, ConsistentRead=True
        )["Item"]
        return int(item["available"]["N"])

    def reservations(self, case_id: str) -> list[dict[str, Any]]:
        return self.items("RESERVATIONS_TABLE", case_id)

    def record(self, action_key: str) -> LedgerRecord | None:
        return self.ledger.get(action_key)

    def case_record(self, case_id: str) -> dict[str, Any] | None:
        return self.cases.get(case_id)

    def admin_case_record(self, case_id: str) -> dict[str, Any] | None:
        """The case record read with the admin client (not one of the tools' requests)."""
        item = self.admin.get_item(
            TableName=self.names["CASES_TABLE"],
            Key={"case_id": {"S": case_id}},
            ConsistentRead=True,
        ).get("Item")
        return from_item(item) if item else None

    def env_vars(self) -> dict[str, str]:
        """Every variable a handler's environment model may declare (saga.settings), with this
        harness's tables and ledger policy."""
        return {
            **self.names,
            "APPROVAL_KEYS": APPROVAL_KEYS_JSON,
            "APPROVAL_THRESHOLDS": json.dumps(THRESHOLDS),
            "REFUND_CEILINGS": json.dumps(self.ceilings),
            "ATTEMPT_BUDGET": str(self.policy.attempt_budget),
            "RETENTION_SECONDS": str(self.policy.retention_seconds),
            "LEASE_MARGIN_SECONDS": str(self.policy.lease_margin_seconds),
            "PAYMENT_KEY_RETENTION_SECONDS": str(PAYMENT_KEY_RETENTION_SECONDS),
            "DOWNSTREAM_TIMEOUT_SECONDS": "5",
            "ESCALATION_QUEUE_URL": ESCALATION_QUEUE_URL,
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }


def create_tables(tables: StackTables, client: Any, names: dict[str, str]) -> None:
    """Every table of the stack, from its template, under `names`; the inventory seeded."""
    create_by_variable(tables, client, names)
    seed_inventory(client, names["INVENTORY_TABLE"], STOCK)


def create_approval_keys(kms: Any) -> None:
    """Every approver's local key in moto's KMS (what APPROVAL_KEYS_JSON names)."""
    for tenant, approvers in TENANTS.items():
        for approver in approvers:
            create_local_key(kms, tenant=tenant, approver=approver)


@contextmanager
def tools_env(
    tables: StackTables, *, attempt_budget: int = 5, retention_seconds: int = 30 * 86400
) -> Iterator[ToolsEnv]:
    """moto DynamoDB with every table of the stack created (`tables`: the session fixture
    `stack_tables`) and the inventory seeded, moto KMS with the approvers' keys, and the
    escalation queue (RecordOutcome's, at Escalate) in moto SQS."""
    with mock_aws():
        admin = boto3.client("dynamodb")
        create_tables(tables, admin, TABLE_NAMES)
        create_approval_keys(boto3.client("kms"))
        queue = boto3.client("sqs").create_queue(QueueName=ESCALATION_QUEUE_URL.rsplit("/", 1)[-1])
        assert queue["QueueUrl"] == ESCALATION_QUEUE_URL, queue["QueueUrl"]
        yield ToolsEnv(
            client=dynamodb_client(),
            admin=admin,
            clock=FakeClock(),
            policy=LedgerPolicy(
                attempt_budget=attempt_budget,
                retention_seconds=retention_seconds,
                lease_margin_seconds=30,
                min_lease_seconds=5,
            ),
        )
