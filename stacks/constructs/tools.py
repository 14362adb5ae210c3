"""The Lambda tools (docs/architecture.md "Lambda functions"), one role per function.

Each function gets exactly the DynamoDB actions it uses on exactly the tables it uses, and
exactly the environment its model declares (saga.settings: one model per function, the one
place that names the variables; the function validates it on entry). The synth refuses a model
whose tables differ from the function's grants. TransactWriteItems needs no action of its own:
IAM authorises each item of a transaction by its item action on its table.

Packaging without Docker: the handler package is `lambdas/` as one asset (the same `saga`
import path as in pytest, stacks/function_code.py) and third-party dependencies come from one
locally pip-built layer (stacks/layer_bundling.py); both carry their bytecode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from saga.settings import (
    TABLES,
    CreateShipmentEnvironment,
    FunctionEnvironment,
    IssueRefundEnvironment,
    ReconcileActionEnvironment,
    RecordOutcomeEnvironment,
    ReleaseReservationEnvironment,
    ReserveStockEnvironment,
    SweepStuckActionsEnvironment,
    ValidateCaseEnvironment,
    table_field,
    variable,
)
from stacks.bytecode import warn_without_bytecode
from stacks.config import SANDBOX_PAYMENTS, STRIPE_PAYMENTS, SagaConfig
from stacks.constructs.approvals import ApprovalKeys
from stacks.constructs.common import acknowledge, grant_table_actions, log_group
from stacks.constructs.stripe_secret import grant_stripe_secret
from stacks.constructs.tables import OPEN_ACTIONS_INDEX
from stacks.function_code import LAMBDAS_DIR, function_code
from stacks.layer_bundling import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME, dependencies_layer

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
QUERY = "dynamodb:Query"

# Table key -> the environment variable that carries its name (declared in saga.settings).
TABLE_VARIABLES: Mapping[str, str] = {table: variable(table_field(table)) for table in TABLES}


@dataclass(frozen=True)
class TableAccess:
    table: str  # a key of TABLE_VARIABLES
    # The actions granted; () = the function gets the table's name (its adapter is built with
    # it) but calls nothing on it.
    actions: tuple[str, ...]
    index: str | None = None  # grant on this index only (Query), not on the table
    # Only where refunds go to the sandbox's provider (`payments`): with Stripe, the function
    # neither gets the grant nor the table's name.
    sandbox_payments: bool = False


@dataclass(frozen=True)
class ToolSpec:
    construct_id: str
    handler: str
    service: str  # POWERTOOLS_SERVICE_NAME: one per function, the metrics' `service` dimension
    description: str
    access: tuple[TableAccess, ...]
    environment: type[FunctionEnvironment]  # what the function reads, validated on entry

    @property
    def verifies_approvals(self) -> bool:
        """Reads the approval keys: gets GetPublicKey on each (docs/design.md §9)."""
        return "approval_keys" in self.environment.model_fields

    @property
    def calls_stripe(self) -> bool:
        """Builds the payment provider: with payments=stripe, reads the API key's secret."""
        return "stripe_secret" in self.environment.model_fields

    @property
    def escalation_queue(self) -> bool:
        return "escalation_queue_url" in self.environment.model_fields

    @property
    def tables(self) -> frozenset[str]:
        """The tables whose names the function's model declares."""
        return frozenset(t for t in TABLES if table_field(t) in self.environment.model_fields)


# Each function's access is exactly what its code calls on AWS, checked by recording the calls
# in the local AWS (tests/e2e/test_grants_match_calls.py), not by reading this list again.
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "ValidateCaseFunction",
        "saga.handlers.validate_case.handler",
        "validate-case",
        "Validate, authorize and verify the signed approval; write the case record",
        (
            # GetItem: whether a case ran under an agent's id that no draft holds (and a case
            # whose approval no longer verifies was accepted before).
            TableAccess("cases", (PUT, GET)),
            # A new case under an agent's case id must be its tenant's draft (GetItem).
            TableAccess("drafts", (GET,)),
            TableAccess("legacy_drafts", (GET,)),
            # The sandbox's name only: whether it is deployed (Stripe's rules refuse faults
            # without).
            TableAccess("sandbox", ()),
        ),
        ValidateCaseEnvironment,
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
            # GetItem: only a case under way (its record IN_PROGRESS) moves forward.
            TableAccess("cases", (GET,)),
            TableAccess("sandbox", (UPDATE,)),
        ),
        ReserveStockEnvironment,
    ),
    ToolSpec(
        "IssueRefundFunction",
        "saga.handlers.issue_refund.handler",
        "issue-refund",
        "Refund through the payment provider, the action key as idempotency key",
        (
            TableAccess("ledger", (PUT, UPDATE)),
            TableAccess("payments", (PUT,), sandbox_payments=True),
            TableAccess("cases", (GET,)),  # as for a reservation
            TableAccess("sandbox", (GET, PUT, UPDATE, DELETE), sandbox_payments=True),
            # The daily refund counters: charged with the claim, given back with a rejection.
            TableAccess("limits", (UPDATE,)),
        ),
        IssueRefundEnvironment,
    ),
    ToolSpec(
        "CreateShipmentFunction",
        "saga.handlers.create_shipment.handler",
        "create-shipment",
        "Create a shipment at the carrier, looked up by business reference before a re-attempt",
        (
            TableAccess("ledger", (PUT, UPDATE)),
            TableAccess("shipments", (PUT,)),
            # GetItem: as for a reservation; UpdateItem: the case record's COMPLETED, in the
            # shipment's transaction (docs/design.md §3.11).
            TableAccess("cases", (GET, UPDATE)),
            TableAccess("sandbox", (GET, UPDATE)),
        ),
        CreateShipmentEnvironment,
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
            # GetItem: an approval that no longer verifies (signed before signing or with a
            # key since removed) is accepted when the case record holds its digest.
            TableAccess("cases", (GET, UPDATE)),
            TableAccess("sandbox", (UPDATE,)),
        ),
        ReleaseReservationEnvironment,
    ),
    ToolSpec(
        "ReconcileActionFunction",
        "saga.handlers.reconcile_action.handler",
        "reconcile-action",
        "Reconcile one step with its downstream by business reference",
        (
            TableAccess("ledger", (GET, PUT, UPDATE)),
            TableAccess("reservations", (GET,)),
            TableAccess("cases", (GET,)),  # the recorded digest, as for a release
            # Names only: the adapters are built with them; every lookup reads the reservation
            # or the sandbox's reference index (a consistent read), never these tables.
            TableAccess("inventory", ()),
            TableAccess("payments", (), sandbox_payments=True),
            TableAccess("shipments", ()),
            TableAccess("sandbox", (GET, UPDATE)),
        ),
        ReconcileActionEnvironment,
    ),
    ToolSpec(
        "RecordOutcomeFunction",
        "saga.handlers.record_outcome.handler",
        "record-outcome",
        "Write the terminal case record and build the execution output",
        (TableAccess("cases", (GET, UPDATE)),),  # GetItem: as for a release
        RecordOutcomeEnvironment,
    ),
    ToolSpec(
        "SweepStuckActionsFunction",
        "saga.handlers.sweep_stuck_actions.handler",
        "sweep-stuck-actions",
        "Scheduled: find actions stuck IN_PROGRESS past their lease or UNKNOWN, escalate them",
        # Query the open actions, then read each one back: the index may be stale.
        (
            TableAccess("ledger", (QUERY,), index=OPEN_ACTIONS_INDEX),
            TableAccess("ledger", (GET,)),
        ),
        SweepStuckActionsEnvironment,
    ),
)


def check_tables_match_grants(spec: ToolSpec) -> None:
    """The tables a function's model names are the tables it is granted (or given names of)."""
    granted = {a.table for a in spec.access}
    if granted != spec.tables:
        raise ValueError(
            f"{spec.construct_id}: {spec.environment.__name__} names tables "
            f"{sorted(spec.tables)} but the function is granted {sorted(granted)}"
        )


def deployed_access(
    spec: ToolSpec, tables: Mapping[str, dynamodb.ITable], config: SagaConfig
) -> tuple[TableAccess, ...]:
    """The function's table access in this deployment: the tables deployed, and the sandbox's
    payment tables only where refunds go to the sandbox's provider."""
    return tuple(
        a
        for a in spec.access
        if a.table in tables and not (a.sandbox_payments and config.payments != SANDBOX_PAYMENTS)
    )


def environment_values(
    config: SagaConfig,
    service: str,
    tables: Mapping[str, dynamodb.ITable],
    escalation_queue: sqs.IQueue,
    approval_keys: ApprovalKeys,
) -> dict[str, Any]:
    """Every value a function's environment may declare, by field name (saga.settings); each
    model takes the ones it declares. A table that is not deployed (the sandbox's) is absent."""
    return {
        "powertools_service_name": service,
        "powertools_metrics_namespace": metrics_namespace(config),
        "powertools_log_level": config.functions.log_level,
        "attempt_budget": config.ledger.attempt_budget,
        "retention_seconds": config.ledger.retention_seconds,
        "lease_margin_seconds": config.ledger.lease_margin_seconds,
        "payment_key_retention_seconds": config.payment_key_retention_hours * 3600,
        "downstream_timeout_seconds": config.downstream_timeout_seconds,
        "payments_provider": config.payments,
        "stripe_secret": config.stripe_secret,
        "approval_keys": approval_keys.trusted_keys(),
        "approval_key_aliases": approval_keys.alias_prefix,
        "approval_thresholds": config.approval_thresholds,
        "refund_ceilings": config.refund_ceilings,
        "escalation_queue_url": escalation_queue.queue_url,
        "stuck_grace_seconds": config.monitoring.stuck_grace_seconds,
        "sweep_every_seconds": config.monitoring.sweep_every_minutes * 60,
        **{table_field(key): table.table_name for key, table in tables.items()},
    }


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
        approval_keys: ApprovalKeys,
        build_cache: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._approval_keys = approval_keys
        layer = dependencies_layer(
            self,
            "DependenciesLayer",
            requirements=LAMBDAS_DIR / "requirements.txt",
            cache_root=build_cache,
        )
        code = function_code(LAMBDAS_DIR)
        warn_without_bytecode(self)
        self._layer, self._code, self._escalation_queue = layer, code, escalation_queue
        self.functions: dict[str, lambda_.Function] = {}
        self.services: dict[str, str] = {}
        # Every function's environment as given (values may be tokens), by construct path:
        # stacks/environment_budget.py checks each fits Lambda's 4 KB.
        self.environments: dict[str, dict[str, str]] = {}
        for spec in TOOL_SPECS:
            check_tables_match_grants(spec)
            access = deployed_access(spec, tables, config)
            self.functions[spec.construct_id] = self._function(
                spec, access, tables, code=code, layer=layer, escalation_queue=escalation_queue
            )
            self.services[spec.construct_id] = spec.service

    def add_function(
        self,
        scope: Construct,
        spec: ToolSpec,
        tables: Mapping[str, dynamodb.ITable],
        *,
        values: Mapping[str, Any],
    ) -> lambda_.Function:
        """One more function built like the tools (role, grants, environment from its model,
        the same code and layer), in `scope`; `values` adds what only it declares."""
        check_tables_match_grants(spec)
        access = deployed_access(spec, tables, self._config)
        return self._function(
            spec,
            access,
            tables,
            code=self._code,
            layer=self._layer,
            escalation_queue=self._escalation_queue,
            scope=scope,
            values=values,
        )

    def _function(
        self,
        spec: ToolSpec,
        access: tuple[TableAccess, ...],
        tables: Mapping[str, dynamodb.ITable],
        *,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        escalation_queue: sqs.IQueue,
        scope: Construct | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> lambda_.Function:
        config = self._config
        name = spec.construct_id.removesuffix("Function")
        scope = scope or self
        logs = log_group(scope, f"{name}LogGroup", config)
        role = iam.Role(
            scope,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{spec.service}: only the table actions this tool uses",
        )
        logs.grant_write(role)
        for grant in access:
            if grant.actions:
                table = tables[grant.table]
                grant_table_actions(role, table, grant.actions, index=grant.index)
        if spec.escalation_queue:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[escalation_queue.queue_arn]
                )
            )
        if spec.verifies_approvals:
            self._approval_keys.grant_verify(role)
        if spec.calls_stripe and config.payments == STRIPE_PAYMENTS:
            grant_stripe_secret(role, config)
        # A table the function is not given (the sandbox's payment tables, with Stripe) has no
        # name in its environment either.
        not_given = {table_field(t): None for t in spec.tables - {a.table for a in access}}
        environment = spec.environment.render(
            {
                **environment_values(
                    config, spec.service, tables, escalation_queue, self._approval_keys
                ),
                **not_given,
                **(values or {}),
            }
        )
        function = lambda_.Function(
            scope,
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
        self.environments[function.node.path] = environment
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
