"""Builds the tools' collaborators from the function's environment: ledger, tables, ports.

The handlers stay thin (parse, wire, call) and the tools stay free of environment lookups, so
tests hand the tools fakes or moto-backed objects directly. Each handler names its function's
environment model (saga.settings); `Runtime.from_env` validates it before anything else, and
asking the Runtime for a collaborator the model does not declare is a ConfigurationError.
A collaborator's module is imported where it is built, so a handler's cold start imports only
what it uses (`make bench`).

Every port comes with the case's sandbox faults for its downstream when the case names any
(saga.sandbox), and as it is otherwise: the tools never see a fault.

Retry layers (docs/design.md §4): the ledger and the same-account inventory writes use
`saga.aws.dynamodb_client()` (botocore standard mode, a few attempts: every write is
conditional or transactional); the payment provider and the carrier get a client with ONE
attempt and explicit timeouts (`DOWNSTREAM_TIMEOUT_SECONDS`), since repeating a side effect is
the ledger's and the workflow's decision, never the SDK's. `saga.aws` keeps one client per
configuration and endpoint for the life of the container.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from saga import clock as saga_clock
from saga.approval_keys import KmsPublicKeys
from saga.approvals import ApprovalVerifier
from saga.aws import (
    downstream_dynamodb_client,
    dynamodb_client,
    kms_client,
    stepfunctions_client,
)
from saga.identity import Operation, action_request
from saga.settings import (
    STRIPE_PAYMENTS,
    ApprovalVariables,
    CarrierVariables,
    CasesVariables,
    ConfigurationError,
    DownstreamVariables,
    DraftsVariables,
    FunctionEnvironment,
    InventoryVariables,
    LedgerVariables,
    LimitsVariables,
    PaymentsProviderVariables,
    PaymentsVariables,
    SandboxVariables,
    Tenants,
    variable,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_stepfunctions.client import SFNClient

    from saga.agent.drafts import DraftStore
    from saga.cases import CaseRecords
    from saga.ceilings import DailyCharge
    from saga.ledger import ActionLedger, Reconciliation
    from saga.models import Case, Step
    from saga.ports.carrier import Carrier
    from saga.ports.inventory import Inventory
    from saga.ports.payments import PaymentProvider
    from saga.sandbox.carrier import SandboxCarrier
    from saga.sandbox.faults import FaultSource
    from saga.sandbox.payment_provider import SandboxPaymentProvider

VariablesT = TypeVar("VariablesT", bound=FunctionEnvironment)


def sandbox_payment_provider(
    env: PaymentsVariables,
    client: DynamoDBClient,
    *,
    case_id: str,
    faults: Sequence[str] = (),
    clock: Callable[[], float] = saga_clock.now,
) -> SandboxPaymentProvider:
    """The sandbox provider from PAYMENTS_TABLE, SANDBOX_TABLE, PAYMENT_KEY_RETENTION_SECONDS;
    `client` is the downstream client (no retries, DOWNSTREAM_TIMEOUT_SECONDS timeouts)."""
    from saga.sandbox.payment_provider import SandboxPaymentProvider

    return SandboxPaymentProvider.create(
        client,
        payments_table=env.require("payments_table"),
        sandbox_table=env.require("sandbox_table"),
        case_id=case_id,
        faults=faults,
        key_retention_seconds=env.payment_key_retention_seconds,
        clock=clock,
    )


# How long a container keeps the Stripe API key before reading its secret again: a rotated key
# is used within this time (Powertools' parameters cache, one per container).
STRIPE_KEY_MAX_AGE_SECONDS = 300
_STRIPE_KEY_PREFIXES = ("sk_", "rk_")  # a secret key, or a restricted key (recommended)


def stripe_api_key(secret: str, *, max_age: int = STRIPE_KEY_MAX_AGE_SECONDS) -> str:
    """The Stripe API key from Secrets Manager (`secret`: its name or ARN), through Powertools'
    parameters utility, cached per container for `max_age` seconds. Never logged: no message
    here carries the value. A read that fails is a TransientError (nothing was claimed or sent
    yet: the workflow retries, a redrive after a fix goes on)."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    from saga.aws import secretsmanager_client
    from saga.errors import TransientError

    provider = _secrets_provider(SecretsProvider, secretsmanager_client())
    try:
        value = provider.get(secret, max_age=max_age)
    except GetParameterError as exc:
        cause = type(exc.__cause__ or exc).__name__
        raise TransientError(
            f"the Stripe API key's secret {secret} could not be read ({cause}): check that it "
            "exists and that this function may read it"
        ) from None
    if not isinstance(value, str) or not value.strip().startswith(_STRIPE_KEY_PREFIXES):
        raise ConfigurationError(
            f"secret {secret} does not hold a Stripe secret or restricted API key (sk_... or "
            "rk_...) as its plain text value"
        )
    return value.strip()


_SECRETS: dict[int, SecretsProvider] = {}


def _secrets_provider(provider_class: type[SecretsProvider], client: Any) -> SecretsProvider:
    """One Powertools provider (and so one cache) per Secrets Manager client: the local AWS runs
    every function in one process, and a client per endpoint (saga.aws)."""
    found = _SECRETS.get(id(client))
    if found is None:
        found = _SECRETS[id(client)] = provider_class(boto3_client=client)
    return found


def stripe_payment_provider(env: PaymentsVariables, case: Case) -> PaymentProvider:
    """The Stripe provider for the case's payment: the key from STRIPE_SECRET, connect and read
    timeouts DOWNSTREAM_TIMEOUT_SECONDS, Stripe's API or STRIPE_API_BASE."""
    from saga.providers.stripe_provider import StripePaymentProvider, stripe_client

    key = stripe_api_key(env.require("stripe_secret"))
    client = stripe_client(key, float(env.downstream_timeout_seconds), env.stripe_api_base)
    return StripePaymentProvider(client, payment_reference=case.refund.payment_reference)


def sandbox_carrier(
    env: CarrierVariables,
    client: DynamoDBClient,
    *,
    case_id: str,
    faults: Sequence[str] = (),
    clock: Callable[[], float] = saga_clock.now,
) -> SandboxCarrier:
    """The sandbox carrier from SHIPMENTS_TABLE and SANDBOX_TABLE (`client` as above)."""
    from saga.sandbox.carrier import SandboxCarrier

    return SandboxCarrier.create(
        client,
        shipments_table=env.require("shipments_table"),
        sandbox_table=env.require("sandbox_table"),
        case_id=case_id,
        faults=faults,
        clock=clock,
    )


class Runtime:
    """What a handler is wired with: its validated environment, and the clients, tables and
    ports built from it on first use (kept for the container's life)."""

    def __init__(self, env: FunctionEnvironment) -> None:
        self.env = env

    @classmethod
    def from_env(cls, model: type[FunctionEnvironment]) -> Runtime:
        """This function's environment, validated (ConfigurationError naming what is wrong)."""
        return cls(model.from_env())

    def variables(self, group: type[VariablesT]) -> VariablesT:
        """The environment as one group of variables; a group the function's model does not
        declare is a wiring mistake, named."""
        if not isinstance(self.env, group):
            raise ConfigurationError(
                f"{type(self.env).__name__} declares no {group.__name__} "
                f"({', '.join(variable(f) for f in group.model_fields)})"
            )
        return self.env

    @cached_property
    def client(self) -> DynamoDBClient:
        return dynamodb_client()

    @cached_property
    def stepfunctions(self) -> SFNClient:
        """Step Functions (the agent tools start and describe executions)."""
        return stepfunctions_client()

    @cached_property
    def downstream_client(self) -> DynamoDBClient:
        timeout = self.variables(DownstreamVariables).downstream_timeout_seconds
        return downstream_dynamodb_client(timeout)

    @cached_property
    def approvals(self) -> ApprovalVerifier:
        """Verifies approvals with APPROVAL_KEYS, four eyes with APPROVAL_THRESHOLDS; each
        public key is fetched once per container (keyed by this function's service name: the
        local AWS runs all functions in one process) and only when an approval is first
        verified."""
        env = self.variables(ApprovalVariables)
        return ApprovalVerifier(
            env.trusted_keys(),
            KmsPublicKeys(kms_client),
            function=env.powertools_service_name,
            thresholds=env.approval_thresholds,
        )

    @property
    def tenants(self) -> Tenants:
        return self.variables(ApprovalVariables).tenants()

    def ledger(self) -> ActionLedger:
        from saga.ledger import ActionLedger

        env = self.variables(LedgerVariables)
        return ActionLedger(env.ledger_table, self.client, env.ledger_policy())

    def refund_charge(self, case: Case) -> DailyCharge | None:
        """The case's refund as its tenant's daily ceiling charges it (REFUND_CEILINGS,
        LIMITS_TABLE; docs/design.md §3.12); None for a tenant without ceilings."""
        from saga.ceilings import daily_charge

        env = self.variables(LimitsVariables)
        return daily_charge(
            env.refund_ceilings,
            tenant_id=case.tenant_id,
            currency=case.refund.currency,
            amount_minor=case.refund.amount_minor,
            table_name=env.limits_table,
            retention_seconds=self.variables(LedgerVariables).retention_seconds,
        )

    def cases(self) -> CaseRecords:
        from saga.cases import CaseRecords

        return CaseRecords(self.client, self.variables(CasesVariables).cases_table)

    def drafts(self) -> DraftStore:
        from saga.agent.drafts import DraftStore

        env = self.variables(DraftsVariables)
        return DraftStore(self.client, env.drafts_table, legacy_table_name=env.legacy_drafts_table)

    def inventory(self, case: Case, operation: Operation) -> Inventory:
        """The inventory as `operation` (reserve or release) of the case reaches it."""
        from saga.inventory import InventoryTables

        env = self.variables(InventoryVariables)
        tables = InventoryTables(self.client, env.inventory_table, env.reservations_table)
        if not case.sandbox.faults_for(operation.value):
            return tables
        from saga.sandbox.inventory import SandboxInventory

        faults = self.faults(case, operation.value)
        return SandboxInventory.for_case(tables, faults, case, operation)

    def faults(self, case: Case, downstream: str) -> FaultSource:
        """The case's sandbox faults for one downstream; no faults costs no request."""
        from saga.sandbox.faults import FaultInjector, NoFaults

        faults = case.sandbox.faults_for(downstream)
        if not faults:
            return NoFaults()
        env = self.variables(SandboxVariables)
        if not env.sandbox_table:
            raise ConfigurationError(
                f"case {case.case_id} asks for sandbox faults on {downstream!r}, but this "
                "function has no SANDBOX_TABLE (the sandbox is not deployed)"
            )
        return FaultInjector(self.client, env.sandbox_table, case.case_id, downstream, faults)

    def payment_provider(self, case: Case) -> PaymentProvider:
        """Stripe's (only its modules imported) or the sandbox's, as the deployment chose."""
        env = self.variables(PaymentsVariables)
        if env.payments_provider == STRIPE_PAYMENTS:
            return stripe_payment_provider(env, case)
        from saga.sandbox.payment_keys import DOWNSTREAM as PAYMENTS_DOWNSTREAM

        return sandbox_payment_provider(
            env,
            self.downstream_client,
            case_id=case.case_id,
            faults=case.sandbox.faults_for(PAYMENTS_DOWNSTREAM),
        )

    def case_rules(self) -> Callable[[Case], None] | None:
        """What ValidateCase refuses beyond the case contract, for the deployment's payment
        provider (saga.providers.stripe_rules)."""
        env = self.variables(PaymentsProviderVariables)
        if env.payments_provider != STRIPE_PAYMENTS:
            from saga.fault_plan import check_sandbox_faults

            return lambda case: check_sandbox_faults(
                case.case_id, case.sandbox.faults_for("refund")
            )
        from saga.providers.stripe_rules import check_stripe_case

        sandbox_deployed = bool(self.variables(SandboxVariables).sandbox_table)
        local_server = env.stripe_api_base is not None
        return lambda case: check_stripe_case(
            case, sandbox_deployed=sandbox_deployed, local_server=local_server
        )

    def carrier(self, case: Case) -> Carrier:
        from saga.sandbox.carrier import DOWNSTREAM as CARRIER_DOWNSTREAM

        return sandbox_carrier(
            self.variables(CarrierVariables),
            self.downstream_client,
            case_id=case.case_id,
            faults=case.sandbox.faults_for(CARRIER_DOWNSTREAM),
        )

    def reconciler(self, case: Case, step: Step) -> StepLookup:
        """The lookup by business reference for one forward step, and how long its downstream
        deduplicates a repeat (None: the lookup sees every request, so "not found" is proof).
        Only the step's own tool and downstream are imported: a container reconciles one step
        per invocation, and the others' modules would be cold-start time for nothing."""
        if step == "reserve":
            from saga.tools.reserve import reconcile_reserve

            inventory = self.inventory(case, Operation.RESERVE)
            return StepLookup(lambda: reconcile_reserve(case, inventory=inventory))
        reference = action_request(case, Operation(step)).reference
        if step == "refund":
            from saga.tools.refund import reconcile_refund

            provider = self.payment_provider(case)
            return StepLookup(
                lambda: reconcile_refund(reference, provider),
                reattempt_window_seconds=provider.idempotency_window_seconds,
            )
        from saga.tools.ship import reconcile_shipment

        carrier = self.carrier(case)
        return StepLookup(lambda: reconcile_shipment(reference, carrier))


@dataclass(frozen=True)
class StepLookup:
    """How the reconcile tool looks one step's effect up, and for how long after a first
    possible dispatch an "absent" still allows a re-attempt (None: the lookup sees every
    request, so "absent" is proof)."""

    find: Callable[[], Reconciliation]
    reattempt_window_seconds: float | None = None
