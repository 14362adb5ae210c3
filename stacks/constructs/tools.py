"""The Lambda tools (docs/architecture.md "Lambda functions"), one role per function.

Each function gets exactly the DynamoDB actions it uses on exactly the tables it uses, and the
environment variables naming those tables (saga.settings reads table names lazily, so a missing
one is a clear ConfigurationError, never a silent default). TransactWriteItems needs no action
of its own: IAM authorises each item of a transaction by its item action on its table.

Packaging without Docker: the handler package is `Code.from_asset("lambdas")` (the same `saga`
import path as in pytest) and third-party dependencies come from one locally pip-built layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.config import SagaConfig
from stacks.constructs.common import acknowledge, grant_table_actions, log_group
from stacks.constructs.tables import OPEN_ACTIONS_INDEX
from stacks.layer_bundling import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME, dependencies_layer

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
QUERY = "dynamodb:Query"

# Table key -> environment variable that carries its name (docs/architecture.md).
TABLE_VARIABLES: Mapping[str, str] = {
    "ledger": "LEDGER_TABLE",
    "cases": "CASES_TABLE",
    "inventory": "INVENTORY_TABLE",
    "reservations": "RESERVATIONS_TABLE",
    "payments": "PAYMENTS_TABLE",
    "shipments": "SHIPMENTS_TABLE",
    "sandbox": "SANDBOX_TABLE",
}


@dataclass(frozen=True)
class TableAccess:
    table: str  # a key of TABLE_VARIABLES
    # The actions granted; () = the function gets the table's name (its adapter is built with
    # it) but calls nothing on it.
    actions: tuple[str, ...]
    index: str | None = None  # grant on this index only (Query), not on the table


@dataclass(frozen=True)
class ToolSpec:
    construct_id: str
    handler: str
    service: str  # POWERTOOLS_SERVICE_NAME: one per function, the metrics' `service` dimension
    description: str
    access: tuple[TableAccess, ...]
    tenants: bool = False  # only validation decides who may approve for a tenant
    escalation_queue: bool = False


# Each function's access is exactly what its code calls on AWS, checked by recording the calls
# in the local AWS (tests/e2e/test_grants_match_calls.py), not by reading this list again.
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "ValidateCaseFunction",
        "saga.handlers.validate_case.handler",
        "validate-case",
        "Validate, authorize and verify the approval; write the case record",
        (TableAccess("cases", (PUT,)),),
        tenants=True,
    ),
    ToolSpec(
        "ReserveStockFunction",
        "saga.handlers.reserve_stock.handler",
        "reserve-stock",
        "Reserve stock: ledger record + stock decrement + reservation in one transaction",
        (
            # GetItem: the record is read when a transaction is refused for a reused token.
            TableAccess("ledger", (PUT, GET)),
            TableAccess("inventory", (UPDATE,)),
            TableAccess("reservations", (PUT,)),
            TableAccess("sandbox", (UPDATE,)),
        ),
    ),
    ToolSpec(
        "IssueRefundFunction",
        "saga.handlers.issue_refund.handler",
        "issue-refund",
        "Refund through the payment provider, the action key as idempotency key",
        (
            TableAccess("ledger", (PUT, UPDATE)),
            TableAccess("payments", (PUT,)),
            TableAccess("sandbox", (GET, PUT, UPDATE, DELETE)),
        ),
    ),
    ToolSpec(
        "CreateShipmentFunction",
        "saga.handlers.create_shipment.handler",
        "create-shipment",
        "Create a shipment at the carrier, looked up by business reference before a re-attempt",
        (
            TableAccess("ledger", (PUT, UPDATE)),
            TableAccess("shipments", (PUT,)),
            TableAccess("sandbox", (GET, UPDATE)),
        ),
    ),
    ToolSpec(
        "ReleaseReservationFunction",
        "saga.handlers.release_reservation.handler",
        "release-reservation",
        "Compensation: release a held reservation and restore its stock once",
        (
            TableAccess("ledger", (GET, PUT, UPDATE)),
            TableAccess("inventory", (UPDATE,)),
            TableAccess("reservations", (GET, UPDATE)),
            TableAccess("cases", (UPDATE,)),
            TableAccess("sandbox", (UPDATE,)),
        ),
    ),
    ToolSpec(
        "ReconcileActionFunction",
        "saga.handlers.reconcile_action.handler",
        "reconcile-action",
        "Reconcile one step with its downstream by business reference",
        (
            TableAccess("ledger", (GET, PUT, UPDATE)),
            TableAccess("reservations", (GET,)),
            # Names only: the adapters are built with them; every lookup reads the reservation
            # or the sandbox's reference index (a consistent read), never these tables.
            TableAccess("inventory", ()),
            TableAccess("payments", ()),
            TableAccess("shipments", ()),
            TableAccess("sandbox", (GET, UPDATE)),
        ),
    ),
    ToolSpec(
        "RecordOutcomeFunction",
        "saga.handlers.record_outcome.handler",
        "record-outcome",
        "Write the terminal case record and build the execution output",
        (TableAccess("cases", (UPDATE,)),),
    ),
    ToolSpec(
        "SweepStuckActionsFunction",
        "saga.handlers.sweep_stuck_actions.handler",
        "sweep-stuck-actions",
        "Scheduled: find actions stuck IN_PROGRESS past their lease or UNKNOWN, escalate them",
        (TableAccess("ledger", (QUERY,), index=OPEN_ACTIONS_INDEX),),
        escalation_queue=True,
    ),
)

LAMBDAS_DIR = Path(__file__).resolve().parents[2] / "lambdas"
ASSET_EXCLUDES = [
    "**/__pycache__",
    "**/*.pyc",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "requirements.txt",
]


def metrics_namespace(config: SagaConfig) -> str:
    """One namespace per stage, so two stages in one account never mix their metrics."""
    return f"ReplacementOrderSaga-{config.stage}"


class ToolFunctions(Construct):
    """All Lambda functions of the saga; `functions[construct_id]` is each one."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        tables: Mapping[str, dynamodb.ITable],
        escalation_queue: sqs.IQueue,
        build_cache: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        layer = dependencies_layer(
            self,
            "DependenciesLayer",
            requirements=LAMBDAS_DIR / "requirements.txt",
            cache_root=build_cache,
        )
        code = lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=ASSET_EXCLUDES)
        self.functions: dict[str, lambda_.Function] = {}
        self.services: dict[str, str] = {}
        for spec in TOOL_SPECS:
            access = tuple(a for a in spec.access if a.table in tables)
            self.functions[spec.construct_id] = self._function(
                spec, access, tables, code=code, layer=layer, escalation_queue=escalation_queue
            )
            self.services[spec.construct_id] = spec.service

    def _function(
        self,
        spec: ToolSpec,
        access: tuple[TableAccess, ...],
        tables: Mapping[str, dynamodb.ITable],
        *,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        escalation_queue: sqs.IQueue,
    ) -> lambda_.Function:
        config = self._config
        name = spec.construct_id.removesuffix("Function")
        logs = log_group(self, f"{name}LogGroup", config)
        role = iam.Role(
            self,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{spec.service}: only the table actions this tool uses",
        )
        logs.grant_write(role)
        environment = {
            "POWERTOOLS_SERVICE_NAME": spec.service,
            "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace(config),
            "POWERTOOLS_LOG_LEVEL": config.functions.log_level,
            "LEASE_MARGIN_SECONDS": str(config.ledger.lease_margin_seconds),
            "ATTEMPT_BUDGET": str(config.ledger.attempt_budget),
            "RETENTION_SECONDS": str(config.ledger.retention_seconds),
            "PAYMENT_KEY_RETENTION_SECONDS": str(config.payment_key_retention_hours * 3600),
            "DOWNSTREAM_TIMEOUT_SECONDS": str(config.downstream_timeout_seconds),
        }
        for grant in access:
            table = tables[grant.table]
            if grant.actions:
                grant_table_actions(role, table, grant.actions, index=grant.index)
            environment[TABLE_VARIABLES[grant.table]] = table.table_name
        if spec.tenants:
            environment["TENANTS"] = config.tenants_json
        if spec.escalation_queue:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[escalation_queue.queue_arn]
                )
            )
            environment["ESCALATION_QUEUE_URL"] = escalation_queue.queue_url
            environment["STUCK_GRACE_SECONDS"] = str(config.monitoring.stuck_grace_seconds)
        function = lambda_.Function(
            self,
            spec.construct_id,
            description=spec.description,
            runtime=LAMBDA_RUNTIME,
            architecture=LAMBDA_ARCHITECTURE,
            handler=spec.handler,
            code=code,
            layers=[layer],
            role=role,
            timeout=Duration.seconds(config.functions.timeout_seconds),
            memory_size=config.functions.memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            log_group=logs,
            environment=environment,
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only the X-Ray statement that active tracing adds uses Resource '*': "
            "xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level "
            "permissions. Table, log group and queue statements name their exact ARNs.",
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "The runtime is pinned to python3.12 because the dependencies layer is "
            "pip-built for cp312 (pydantic-core is a compiled wheel); runtime and layer ABI "
            "are changed together in stacks/layer_bundling.py.",
        )
        return function
