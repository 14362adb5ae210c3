"""Each function's environment, declared once as a pydantic model (docs/architecture.md).

A model names every variable its function reads: a field's name upper-cased is the variable
(`ledger_table` -> LEDGER_TABLE). The stack builds each function's environment from its model
(`FunctionEnvironment.render`, called by stacks/constructs/tools.py: exactly the declared
variables), and the handler validates it on entry (`from_env`), before anything else happens: a
missing or malformed variable is a `ConfigurationError` naming it. Values come from cdk.json
through the stack; no model has a default for a policy value, so a function never runs on a
value nobody configured. The sandbox tables are one optional group: a stack without the
sandbox has none, and asking for one is the same ConfigurationError, naming it. Where refunds go
is the other: PAYMENTS_PROVIDER is the sandbox's unless set (the stack always sets it), and
"stripe" requires STRIPE_SECRET.

`ConfigurationError` is deliberately not a `SagaError`: a misconfigured function is a deployment
fault the workflow must not route as a business outcome (the execution fails and can be redriven
after the fix).
"""

# Annotations are evaluated as the classes are created (no `from __future__ import annotations`):
# pydantic evaluates every field annotation of a model anyway, and a postponed one is first
# compiled back from its string (about 3 ms of a tool's cold start: case, payload, environment).

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from saga.approval_keys import TrustedKeys, parse_trusted_keys
from saga.ceilings import parse_ceilings
from saga.four_eyes import FOUR_EYES, parse_thresholds

if TYPE_CHECKING:
    from saga.ledger import LedgerPolicy

# Powertools' levels that the stack's `functions.log_level` allows.
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
Tenants = dict[str, frozenset[str]]
TABLES = (
    "ledger",
    "cases",
    "drafts",
    "legacy_drafts",
    "inventory",
    "reservations",
    "payments",
    "shipments",
    "sandbox",
    "limits",
)
_CUSTOM = "configuration"  # the pydantic error type of this module's own checks


class ConfigurationError(RuntimeError):
    """A required environment variable is missing or malformed; the message names it."""


def variable(field_name: str) -> str:
    """The environment variable of a model field: its name upper-cased."""
    return field_name.upper()


def table_field(table: str) -> str:
    """The field (and, upper-cased, the variable) that carries one table's name."""
    if table not in TABLES:
        raise ValueError(f"not a table of the saga: {table!r}")
    return f"{table}_table"


def _json_value(name: str, raw: str | Mapping[str, Any]) -> Any:
    """A variable's JSON text, parsed (a mapping given as it is stays as it is)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{name} is not valid JSON: {exc.msg}") from None


def parse_tenants(raw: str | Mapping[str, Any]) -> Tenants:
    """TENANTS: `{"tenant": ["approver", ...]}`, who may approve for which tenant."""
    name = variable("tenants")
    value = _json_value(name, raw)
    if not isinstance(value, Mapping):
        raise ConfigurationError(f'{name} must be a JSON object {{"tenant": ["approver", ...]}}')
    tenants: Tenants = {}
    for tenant, approvers in value.items():
        if not isinstance(approvers, list | tuple | frozenset) or not all(
            isinstance(a, str) for a in approvers
        ):
            raise ConfigurationError(f"{name}[{tenant!r}] must be a list of approver strings")
        tenants[str(tenant)] = frozenset(approvers)
    return tenants


def tenants_variable(tenants: Mapping[str, Iterable[str]]) -> str:
    """The TENANTS value for a tenants mapping (what the stack sets)."""
    return json.dumps(
        {tenant: sorted(approvers) for tenant, approvers in tenants.items()}, sort_keys=True
    )


def parse_approval_keys(raw: str | Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """APPROVAL_KEYS as the stack writes it, checked and kept as written (compact):
    `{"tenant": {"approver": N or {"current": REF, "retired": [REF]}}}`, N the generations of
    the stack's keys (named by alias), REF a key ARN or a generation (saga.approval_keys).
    `ApprovalVariables.trusted_keys()` resolves it."""
    name = variable("approval_keys")
    value = _json_value(name, raw)
    try:
        parse_trusted_keys(value, alias_prefix="alias/checked")  # the structure only
    except ValueError as exc:
        separator = "" if str(exc).startswith("[") else " "
        raise ConfigurationError(f"{name}{separator}{exc}") from None
    return dict(value)


def parse_approval_thresholds(raw: str | Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """APPROVAL_THRESHOLDS: `{"tenant": {"CURRENCY": minor units}}`, four eyes above them
    (saga.four_eyes); `{}` when no tenant has thresholds."""
    name = variable("approval_thresholds")
    try:
        return parse_thresholds(_json_value(name, raw))
    except ValueError as exc:
        separator = "" if str(exc).startswith("[") else " "
        raise ConfigurationError(f"{name}{separator}{exc}") from None


def parse_refund_ceilings(raw: str | Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """REFUND_CEILINGS: `{"tenant": {"CURRENCY": minor units}}`, the most each tenant may
    refund in a UTC day (saga.ceilings); `{}` when no tenant has a ceiling."""
    name = variable("refund_ceilings")
    try:
        return parse_ceilings(_json_value(name, raw))
    except ValueError as exc:
        separator = "" if str(exc).startswith("[") else " "
        raise ConfigurationError(f"{name}{separator}{exc}") from None


def _checked(parse: Callable[[Any], Any]) -> BeforeValidator:
    """A field validator from a parser that raises ConfigurationError with its own message."""

    def validate(value: Any) -> Any:
        try:
            return parse(value)
        except ConfigurationError as exc:
            raise PydanticCustomError(_CUSTOM, str(exc)) from None

    return BeforeValidator(validate)


TableName = Annotated[str, Field(min_length=1)]
Text = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
ApprovalKeysValue = Annotated[dict[str, dict[str, Any]], _checked(parse_approval_keys)]
ThresholdsValue = Annotated[dict[str, dict[str, int]], _checked(parse_approval_thresholds)]
CeilingsValue = Annotated[dict[str, dict[str, int]], _checked(parse_refund_ceilings)]


class FunctionEnvironment(BaseModel):
    """What every function reads (Powertools reads these itself; they are declared here so that
    the stack sets them from this one list)."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",  # the runtime's own variables (AWS_*, _HANDLER, ...) are not ours
        alias_generator=variable,
        validate_by_alias=True,
        validate_by_name=True,
        # A function validates one of these models: the others never build their validators
        # (about 1 ms each at cold start); its own builds on its first validation.
        defer_build=True,
    )

    powertools_service_name: Text
    powertools_metrics_namespace: Text
    powertools_log_level: LogLevel
    # No pydantic plugin is used; without this, the first model scans every installed
    # distribution's entry points at cold start.
    pydantic_disable_plugins: Literal["__all__"] = "__all__"

    @classmethod
    def variables(cls) -> tuple[str, ...]:
        """The variables this function reads, in declaration order."""
        return tuple(variable(name) for name in cls.model_fields)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Validate this function's variables (os.environ by default); an empty value counts
        as unset. Raises ConfigurationError naming every variable that is missing or wrong."""
        env = os.environ if environ is None else environ
        present = {name: env[name] for name in cls.variables() if env.get(name)}
        try:
            return cls.model_validate(present)
        except ValidationError as exc:
            raise ConfigurationError(describe(exc)) from None

    @classmethod
    def render(cls, values: Mapping[str, Any]) -> dict[str, str]:
        """The environment the stack gives this function: its declared fields taken from
        `values` (keyed by field name; a superset is fine, None means "not deployed"),
        validated, as strings. Raises ConfigurationError for a required one that is missing."""
        declared = {name: values[name] for name in cls.model_fields if values.get(name) is not None}
        try:
            model = cls.model_validate(declared)
        except ValidationError as exc:
            raise ConfigurationError(f"{cls.__name__}: {describe(exc)}") from None
        return model.to_environment()

    def to_environment(self) -> dict[str, str]:
        return {variable(name): _as_variable(value) for name, value in self if value is not None}

    def require(self, field_name: str) -> str:
        """An optional variable this use needs (a sandbox table)."""
        value = getattr(self, field_name, None)
        if not value:
            raise ConfigurationError(
                f"environment variable {variable(field_name)} is required by this function "
                "but not set"
            )
        return str(value)


def _as_variable(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, Mapping):
        # Compact: every variable shares the 4 KB of an environment (stacks/environment_budget.py).
        return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"))
    return str(value)


def _plain(value: Any) -> Any:
    """JSON-ready: approvers (frozensets) as sorted lists."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(value)
    return value


def describe(exc: ValidationError) -> str:
    """One sentence per wrong variable, each naming it."""
    return "; ".join(_describe(error) for error in exc.errors(include_url=False))


def _describe(error: Any) -> str:
    name = str(error["loc"][0]) if error["loc"] else "?"
    kind, given = error["type"], error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"environment variable {name} is required by this function but not set"
    if kind == _CUSTOM:
        return str(error["msg"])
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"{name} must be an integer, got {given!r}"
    if kind in {"float_parsing", "float_type"}:
        return f"{name} must be a number, got {given!r}"
    if kind == "greater_than" and ctx.get("gt") == 0:
        return f"{name} must be positive, got {given!r}"
    if kind == "greater_than_equal":
        return f"{name} must be >= {ctx.get('ge')}, got {given!r}"
    if kind == "literal_error":
        return f"{name} must be {ctx.get('expected')}, got {given!r}"
    return f"{name}: {error['msg']}, got {given!r}"


# --- the variables, by what a function does with them ------------------------------------------
class LedgerVariables(FunctionEnvironment):
    ledger_table: TableName
    attempt_budget: PositiveInt
    retention_seconds: PositiveInt
    lease_margin_seconds: NonNegativeInt

    def ledger_policy(self) -> "LedgerPolicy":
        from saga.ledger import LedgerPolicy  # a function without a ledger never imports it

        return LedgerPolicy(
            attempt_budget=self.attempt_budget,
            retention_seconds=self.retention_seconds,
            lease_margin_seconds=self.lease_margin_seconds,
        )


class CasesVariables(FunctionEnvironment):
    cases_table: TableName


class InventoryVariables(FunctionEnvironment):
    inventory_table: TableName
    reservations_table: TableName


class SandboxVariables(FunctionEnvironment):
    # The sandbox's control table (fault cursors, provider keys): only where it is deployed.
    sandbox_table: TableName | None = None


class DownstreamVariables(SandboxVariables):
    downstream_timeout_seconds: PositiveFloat


PaymentsProvider = Literal["sandbox", "stripe"]
SANDBOX_PAYMENTS: PaymentsProvider = "sandbox"
STRIPE_PAYMENTS: PaymentsProvider = "stripe"


class PaymentsProviderVariables(FunctionEnvironment):
    # Where refunds go (cdk context `payments`): the sandbox's provider unless a deployment
    # chose Stripe; the stack always sets it.
    payments_provider: PaymentsProvider = SANDBOX_PAYMENTS
    # With payments_provider "stripe", optionally: another API base URL, a Stripe-compatible
    # server that is not Stripe's (the local one of `sagactl local up --payments stripe`, which
    # also acts out the cases' refund faults). The stack never sets it.
    stripe_api_base: Annotated[str, Field(pattern=r"^https?://[^\s/]+$")] | None = None


class PaymentsVariables(DownstreamVariables, PaymentsProviderVariables):
    payments_table: TableName | None = None  # the sandbox payment provider's table
    payment_key_retention_seconds: PositiveInt
    # With payments_provider "stripe": the Secrets Manager secret (name or ARN) holding the API
    # key.
    stripe_secret: Text | None = None

    @model_validator(mode="after")
    def _stripe_needs_its_secret(self) -> Self:
        if self.payments_provider == STRIPE_PAYMENTS and not self.stripe_secret:
            raise PydanticCustomError(
                _CUSTOM,
                f"{variable('payments_provider')} is stripe: environment variable "
                f"{variable('stripe_secret')} (the API key's secret) is required but not set",
            )
        return self


class CarrierVariables(DownstreamVariables):
    shipments_table: TableName | None = None  # the sandbox carrier's table


class DraftsVariables(FunctionEnvironment):
    drafts_table: TableName
    # Drafts proposed before ids carried the tenant, keyed by case_id alone (docs/design.md §10).
    legacy_drafts_table: TableName


class ApprovalVariables(FunctionEnvironment):
    approval_keys: ApprovalKeysValue
    # Four eyes (saga.four_eyes): ValidateCase decides with them; a tool after it with the
    # count on the case record, or with them where there is no record.
    approval_thresholds: ThresholdsValue
    # The alias prefix of the keys the stack created (APPROVAL_KEYS names them by generation);
    # needed only when it does.
    approval_key_aliases: Text | None = None

    @model_validator(mode="after")
    def _generations_need_the_prefix(self) -> Self:
        try:
            self.trusted_keys()
        except ValueError as exc:
            raise PydanticCustomError(
                _CUSTOM,
                f"{variable('approval_keys')}{exc} (set {variable('approval_key_aliases')})",
            ) from None
        for tenant in self.approval_thresholds:
            if len(self.approval_keys.get(tenant) or {}) < FOUR_EYES:
                raise PydanticCustomError(
                    _CUSTOM,
                    f"{variable('approval_thresholds')}[{tenant!r}]: four eyes needs at least "
                    f"{FOUR_EYES} approvers of the tenant in {variable('approval_keys')}",
                )
        return self

    def trusted_keys(self) -> TrustedKeys:
        """Tenant -> approver -> ApproverKeys (key ARNs, or the created keys' aliases)."""
        return parse_trusted_keys(self.approval_keys, self.approval_key_aliases)

    def tenants(self) -> Tenants:
        """Who may approve for which tenant: every approver has keys, so the keys' map says it
        (one list of approvers in the environment, not two: Lambda's 4 KB are shared)."""
        return {tenant: frozenset(approvers) for tenant, approvers in self.approval_keys.items()}


class RefundCeilingsVariables(FunctionEnvironment):
    # The daily refund ceilings (saga.ceilings): ValidateCase refuses a refund above one,
    # IssueRefund charges each refund's day against them.
    refund_ceilings: CeilingsValue


class LimitsVariables(RefundCeilingsVariables):
    # The counters of the refunds charged per tenant, currency and UTC day.
    limits_table: TableName


# --- one model per function (stacks/constructs/tools.py TOOL_SPECS) ------------------------------
class ValidateCaseEnvironment(
    CasesVariables,
    DraftsVariables,
    ApprovalVariables,
    PaymentsProviderVariables,
    SandboxVariables,
    RefundCeilingsVariables,
):
    """SANDBOX_TABLE only says whether the sandbox is deployed: with Stripe, a case asking for
    faults where there is none is refused (saga.providers.stripe_rules). The drafts tables: a
    new case under an agent's case id starts only as that agent's draft (docs/design.md §10)."""


class ReserveStockEnvironment(
    LedgerVariables, InventoryVariables, SandboxVariables, CasesVariables, ApprovalVariables
):
    pass


class IssueRefundEnvironment(
    LedgerVariables, PaymentsVariables, CasesVariables, ApprovalVariables, LimitsVariables
):
    pass


class CreateShipmentEnvironment(
    LedgerVariables, CarrierVariables, CasesVariables, ApprovalVariables
):
    pass


class ReleaseReservationEnvironment(
    LedgerVariables, InventoryVariables, CasesVariables, SandboxVariables, ApprovalVariables
):
    pass


class ReconcileActionEnvironment(
    LedgerVariables,
    InventoryVariables,
    PaymentsVariables,
    CarrierVariables,
    CasesVariables,
    ApprovalVariables,
):
    pass


class EscalationQueueVariables(FunctionEnvironment):
    escalation_queue_url: Text


class RecordOutcomeEnvironment(CasesVariables, ApprovalVariables, EscalationQueueVariables):
    pass


def parse_agent_targets(raw: str | Mapping[str, Any]) -> dict[str, str]:
    """AGENT_TARGETS: `{"<gateway target name>": "<tenant>"}`, which tenant a call through each
    AgentCore Gateway target acts for (docs/design.md §10): trusted configuration, never an
    argument."""
    name = variable("agent_targets")
    value = _json_value(name, raw)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ConfigurationError(f'{name} must be a JSON object {{"target name": "tenant"}}')
    return dict(value)


AgentTargetsValue = Annotated[dict[str, str], _checked(parse_agent_targets)]


class AgentToolsEnvironment(CasesVariables, DraftsVariables, ApprovalVariables):
    """The agent tools behind the AgentCore Gateway (saga.handlers.agent_tools)."""

    state_machine_arn: Text
    agent_targets: AgentTargetsValue


class SweepStuckActionsEnvironment(EscalationQueueVariables):
    ledger_table: TableName
    # How long past its lease an open action may sit before it counts as stuck.
    stuck_grace_seconds: NonNegativeInt
    # How often the schedule runs the sweeper: the unit of its re-send back-off.
    sweep_every_seconds: PositiveInt


__all__ = [
    "TABLES",
    "AgentToolsEnvironment",
    "ConfigurationError",
    "CreateShipmentEnvironment",
    "FunctionEnvironment",
    "IssueRefundEnvironment",
    "ReconcileActionEnvironment",
    "RecordOutcomeEnvironment",
    "ReleaseReservationEnvironment",
    "ReserveStockEnvironment",
    "SweepStuckActionsEnvironment",
    "ValidateCaseEnvironment",
    "parse_tenants",
    "table_field",
    "tenants_variable",
    "variable",
]
