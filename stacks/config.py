"""SagaConfig: the cdk context as pydantic models, the one configuration place (docs/design.md §4).

Every policy value the stack and the state machine use comes from here: retry policies, task
timeouts, lease margin, attempt budget, retention, sandbox on/off. `SagaConfig.from_context`
reads what `node.try_get_context` returns for each key, `from_mapping` a plain mapping; both
raise `ConfigError` naming each offending key ("context 'ledger.attempt_budget' must be a
positive integer, got 0"), so a bad `cdk.json` or `-c key=value` fails the synth with a clear
message instead of deploying nonsense. cdk.json is the only source of the deployed values: no
section has a default for a policy value. Each function's environment is declared apart, in the
Lambda package (saga.settings), and the stack builds it from these values.

Retry policies (`retry`) are named classes; each has IntervalSeconds, MaxAttempts,
BackoffRate, MaxDelaySeconds and optionally ErrorEquals (default: TransientError plus the
Lambda invoke-level errors). JitterStrategy is always FULL. Which class a Task state uses is
decided by `task_retry_class`, looked up in this order: the state's name, then the
`${...}` substitution its Arguments target (for example `ReleaseReservationFunctionArn`),
then `default`. The `pending` class is special: it is added to every Lambda task as the Retry
for `ActionPending` (another live attempt owns the action).

The `pending` retrier must outlast the lease of the attempt it waits for, or its last retry
still meets a live lease and the execution fails at that task. A lease lasts at most the
function timeout plus `ledger.lease_margin_seconds` (saga.ledger.LedgerPolicy.lease_seconds:
the Lambda's remaining time plus the margin), 30 + 10 = 40 s with cdk.json's values. Step
Functions' FULL jitter makes retry n (from 0) wait uniform(0, min(MaxDelaySeconds,
IntervalSeconds * BackoffRate**n)), so the total wait is a sum of independent uniforms and
P(total < lease) has a closed form (`full_jitter_total_wait_below`). The config refuses a
`pending` policy for which that probability exceeds PENDING_OUTLAST_BOUND (1 in 1,000).
cdk.json's policy (5 s, x2, at most 30 s, 10 retries: waits up to 5, 10, 20, then 30 s) gives
P(total < 40 s) = 9.1e-5, about 1 in 11,000; the previous 6 retries gave 0.088, 1 in 11.
Ignoring the time the attempts themselves take only makes the bound conservative.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from saga.ledger import LedgerPolicy
from saga.models import TENANT_ID_PATTERN
from saga.settings import tenants_variable
from stacks.ceilings_config import ceilings_value, check_ceilings
from stacks.config_sections import (
    AgentGatewayConfig,
    ApproverKeyConfig,
    Count,
    FunctionsConfig,
    KmsKeyArn,
    LedgerConfig,
    MonitoringConfig,
    WorkflowConfig,
    admit_a_common_token,
    secret_reference,
)
from stacks.context import (
    ConfigError,
    ContextSection,
    boolean,
    describe,
    from_json,
    invalid,
    refused,
    string_list,
)
from stacks.four_eyes_config import (
    account_wide_four_eyes_approvers,
    check_no_shared_signers,
    check_one_person_one_signature,
    check_thresholds_name_four_eyes_tenants,
    thresholds_value,
)
from stacks.lambda_errors import LAMBDA_INVOKE_ERRORS
from stacks.retry_policy import (
    DEFAULT_RETRY_ERRORS,
    PENDING_CLASS,
    PENDING_ERRORS,
    RetryPolicy,
    full_jitter_total_wait_below,
)

REDRIVE_WINDOW_SECONDS = 14 * 86_400  # Step Functions redrives within 14 days of a close
# Retry classes of tasks whose every delivery counts against the ledger's lifetime budget.
LEDGER_GUARDED_CLASSES = ("tool", "compensation")
DEFAULT_CLASS_KEY = "default"
# The pending retrier's last retry may still meet a live lease with at most this probability.
PENDING_OUTLAST_BOUND = Fraction(1, 1000)
# No lease is shorter (saga.ledger.LedgerPolicy.min_lease_seconds, the one definition).
LEDGER_MIN_LEASE_SECONDS = LedgerPolicy.min_lease_seconds

_STAGE_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
# The payment providers the refund tool can use (`payments`); the default is the sandbox's.
SANDBOX_PAYMENTS = "sandbox"
STRIPE_PAYMENTS = "stripe"
PAYMENT_PROVIDERS = (SANDBOX_PAYMENTS, STRIPE_PAYMENTS)
# Requests of one refund at Stripe (the payment read, the refund), each a connect and a read.
STRIPE_TIMEOUTS_PER_REFUND = 4


def _stage(value: Any) -> str:
    stage = value or "dev"
    if not isinstance(stage, str) or not _STAGE_PATTERN.match(stage):
        raise invalid(
            f"must match {_STAGE_PATTERN.pattern} (it names the stack and its resources), "
            f"got {stage!r}"
        )
    return stage


def _payments(value: Any) -> str:
    if value not in PAYMENT_PROVIDERS:
        raise invalid(f"must be one of {list(PAYMENT_PROVIDERS)}, got {value!r}")
    return str(value)


def _tenants(value: Any) -> dict[str, tuple[str, ...]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise invalid(f"is not valid JSON: {exc}") from None
    if not isinstance(value, Mapping) or not value:
        raise invalid(f"must be a non-empty object {{tenant: [approver, ...]}}, got {value!r}")
    tenants: dict[str, tuple[str, ...]] = {}
    for tenant, approvers in value.items():
        # The case model's own pattern (a case of any other tenant id is refused): without '#',
        # part of the action key, nor '_', which ends the tenant in an agent case id
        # `agt_<tenant>_...` and makes the agent roles' `agt_<tenant>_*` grants its alone.
        if not isinstance(tenant, str) or re.fullmatch(TENANT_ID_PATTERN, tenant) is None:
            raise invalid(
                f"key {tenant!r} must match {TENANT_ID_PATTERN}, the case model's tenant id: "
                "lower-case letters, digits and '-' (without '#', part of the action key, or '_', "
                "which ends the tenant in an agent case id agt_<tenant>_...)"
            )
        try:
            tenants[tenant] = string_list(approvers)
        except PydanticCustomError as exc:
            raise refused(f"context 'tenants.{tenant}' {exc.message()}") from None
    return tenants


def _retry_policies(value: Any) -> Any:
    value = from_json(value)
    if not isinstance(value, Mapping) or not value:
        raise invalid(f"must be an object of named policies, got {value!r}")
    # Each policy learns its name: the default ErrorEquals depends on it.
    return {
        name: {**spec, "name": name} if isinstance(spec, Mapping) else spec
        for name, spec in value.items()
    }


def _task_retry_class(value: Any) -> Any:
    value = from_json(value)
    if not isinstance(value, Mapping) or DEFAULT_CLASS_KEY not in value:
        raise invalid(
            "must be an object mapping state names or substitution names to retry policy "
            f"names, with a {DEFAULT_CLASS_KEY!r} entry; got {value!r}"
        )
    for key, class_name in value.items():
        if not isinstance(class_name, str):
            raise refused(
                f"context 'task_retry_class.{key}' must be a policy name, got {class_name!r}"
            )
    return dict(value)


class SagaConfig(ContextSection):
    """The whole context. Keys outside it (the CDK's own, feature flags) are not its business;
    the retention stages, the stage and the sandbox flag have defaults, policy values none."""

    model_config = ConfigDict(extra="ignore")
    _strict_keys: ClassVar[bool] = False

    stage: Annotated[str, BeforeValidator(_stage)] = "dev"
    sandbox: Annotated[bool, BeforeValidator(boolean)] = True
    # Which payment provider the refunds go to (the sandbox's unless configured otherwise).
    payments: Annotated[str, BeforeValidator(_payments)] = SANDBOX_PAYMENTS
    # With payments=stripe: the secret holding the API key (a name or an ARN), and the
    # customer-managed KMS key that encrypts it, if not Secrets Manager's own.
    stripe_secret: Annotated[str, BeforeValidator(secret_reference)] | None = None
    stripe_secret_kms_key: KmsKeyArn | None = None
    retain_data_stages: Annotated[tuple[str, ...], BeforeValidator(string_list)] = ("prod",)
    tenants: Annotated[dict[str, tuple[str, ...]], BeforeValidator(_tenants)]
    # Optional: per approver, a key of your own, who signs, retired keys (see ApproverKeyConfig).
    approval_keys: Annotated[dict[str, ApproverKeyConfig], BeforeValidator(from_json)] = {}
    # Optional: four eyes, per tenant a threshold per currency in minor units (docs/design.md §9).
    approval_thresholds: Annotated[
        dict[str, dict[str, int]], BeforeValidator(thresholds_value)
    ] = {}
    # Optional: per tenant a daily refund ceiling per currency in minor units (§3.12).
    refund_ceilings: Annotated[dict[str, dict[str, int]], BeforeValidator(ceilings_value)] = {}
    # Optional: the agent tools behind AgentCore Gateway (off by default).
    agent_gateway: AgentGatewayConfig = AgentGatewayConfig()
    ledger: LedgerConfig
    payment_key_retention_hours: Count
    downstream_timeout_seconds: Count
    functions: FunctionsConfig
    workflow: WorkflowConfig
    retry: Annotated[dict[str, RetryPolicy], BeforeValidator(_retry_policies)]
    task_retry_class: Annotated[dict[str, str], BeforeValidator(_task_retry_class)]
    monitoring: MonitoringConfig

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> SagaConfig:
        """Build from a context getter (`app.node.try_get_context`); raises ConfigError."""
        raw = {key: get(key) for key in cls.model_fields}
        return cls.from_mapping({key: value for key, value in raw.items() if value is not None})

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SagaConfig:
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(describe(exc)) from None

    # --- derived values -----------------------------------------------------------------------
    @property
    def retain_data(self) -> bool:
        return self.stage in self.retain_data_stages

    @property
    def stack_name(self) -> str:
        return f"ReplacementOrderSaga-{self.stage}"

    @property
    def tenants_json(self) -> str:
        """The TENANTS environment value: `{"tenant": ["approver", ...]}`."""
        return tenants_variable(self.tenants)

    def retry_class_for(self, state_name: str, target: str | None) -> RetryPolicy:
        """The retry policy of a Task: by state name, then by the substitution it targets."""
        for key in (state_name, target):
            if key is not None and key in self.task_retry_class:
                return self.retry[self.task_retry_class[key]]
        return self.retry[self.task_retry_class[DEFAULT_CLASS_KEY]]

    @property
    def pending_policy(self) -> RetryPolicy:
        return self.retry[PENDING_CLASS]

    @property
    def longest_lease_seconds(self) -> int:
        """The longest lease a delivery holds: the ledger's lease for a delivery with a whole
        function timeout left (saga.ledger.LedgerPolicy.lease_seconds)."""
        policy = LedgerPolicy(lease_margin_seconds=self.ledger.lease_margin_seconds)
        return math.ceil(policy.lease_seconds(self.functions.timeout_seconds))

    # --- checks across keys -------------------------------------------------------------------
    @model_validator(mode="after")
    def _consistent(self) -> SagaConfig:
        if self.workflow.lambda_task_timeout_seconds >= self.functions.timeout_seconds:
            raise refused(
                "context 'workflow.lambda_task_timeout_seconds' "
                f"({self.workflow.lambda_task_timeout_seconds}) must be shorter than "
                f"'functions.timeout_seconds' ({self.functions.timeout_seconds}) so a hung tool "
                "surfaces as States.Timeout and goes to reconciliation"
            )
        if self.downstream_timeout_seconds >= self.functions.timeout_seconds:
            raise refused(
                f"context 'downstream_timeout_seconds' ({self.downstream_timeout_seconds}) must "
                f"fit inside 'functions.timeout_seconds' ({self.functions.timeout_seconds})"
            )
        if PENDING_CLASS not in self.retry:
            raise refused(f"context 'retry' must define the {PENDING_CLASS!r} policy")
        pending = set(self.retry[PENDING_CLASS].error_equals)
        for name, policy in self.retry.items():
            if name != PENDING_CLASS and pending & set(policy.error_equals):
                raise refused(
                    f"context 'retry.{name}.ErrorEquals' must not list {sorted(pending)}: "
                    f"those are retried by the {PENDING_CLASS!r} policy"
                )
        self._check_stripe()
        self._check_budget_outlasts_one_run()
        self._check_retention_outlasts_redrives()
        self._check_approval_keys_name_approvers()
        check_thresholds_name_four_eyes_tenants(self.approval_thresholds, self.tenants)
        check_no_shared_signers(self.tenants, self.approver_keys)
        check_one_person_one_signature(
            self.approval_thresholds,
            self.tenants,
            self.approver_keys,
            account_wide_allowed=self.sandbox_payments_only,
        )
        check_ceilings(self.refund_ceilings, self.tenants, self.approval_thresholds)
        self._check_agent_gateway_tenants()
        self._check_pending_outlasts_a_lease()
        for key, class_name in self.task_retry_class.items():
            if class_name not in self.retry:
                raise refused(
                    f"context 'task_retry_class.{key}' names unknown retry policy "
                    f"{class_name!r}; known: {sorted(self.retry)}"
                )
        return self

    def _check_stripe(self) -> None:
        if self.payments != STRIPE_PAYMENTS:
            for key in ("stripe_secret", "stripe_secret_kms_key"):
                if getattr(self, key) is not None:
                    raise refused(
                        f"context {key!r} is read only with 'payments' = {STRIPE_PAYMENTS!r} "
                        f"(refunds go to the {self.payments} provider here)"
                    )
            return
        if self.stripe_secret is None:
            raise refused(
                "context 'payments' is 'stripe': set 'stripe_secret' to the name or ARN of the "
                "Secrets Manager secret that holds the API key (cdk deploy -c payments=stripe -c "
                "stripe_secret=<name or ARN>)"
            )
        budget = STRIPE_TIMEOUTS_PER_REFUND * self.downstream_timeout_seconds
        if budget >= self.workflow.lambda_task_timeout_seconds:
            raise refused(
                f"context 'downstream_timeout_seconds' ({self.downstream_timeout_seconds}): a "
                f"refund at Stripe waits at most {STRIPE_TIMEOUTS_PER_REFUND} times it (the "
                f"payment read and the refund, each a connect and a read), {budget} s, which "
                "must fit inside 'workflow.lambda_task_timeout_seconds' "
                f"({self.workflow.lambda_task_timeout_seconds})"
            )

    def _check_approval_keys_name_approvers(self) -> None:
        approvers = {f"{t}/{a}" for t, names in self.tenants.items() for a in names}
        for key in self.approval_keys:
            if key not in approvers:
                raise refused(
                    f"context 'approval_keys.{key}' names no approver of 'tenants' (keys are "
                    f"'<tenant>/<approver>', one of {sorted(approvers)})"
                )

    def _check_agent_gateway_tenants(self) -> None:
        gateway = self.agent_gateway
        if gateway.enabled and not gateway.tenants:
            raise refused(
                "context 'agent_gateway.enabled' needs 'agent_gateway.tenants': one gateway per "
                "tenant, each with its inbound authorizer"
            )
        for tenant in gateway.tenants:
            if tenant not in self.tenants:
                raise refused(
                    f"context 'agent_gateway.tenants.{tenant}' names no tenant of 'tenants' "
                    f"({sorted(self.tenants)})"
                )
        # The tenant is the gateway's: one token that two gateways admit acts for both tenants.
        names = sorted(gateway.tenants)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if admit_a_common_token(gateway.tenants[first], gateway.tenants[second]):
                    raise refused(
                        f"context 'agent_gateway.tenants': the gateways of {first!r} and "
                        f"{second!r} could admit the same token (one issuer, and clients and "
                        "audiences that are not disjoint): a token of one tenant would act "
                        "for the other; give each tenant its own clients or audience"
                    )

    @property
    def sandbox_payments_only(self) -> bool:
        """No real money can move: the sandbox is on and refunds go to its provider."""
        return self.sandbox and self.payments == SANDBOX_PAYMENTS

    def account_wide_four_eyes_approvers(self) -> list[tuple[str, str]]:
        """(tenant, approver) of the four-eyes approvers whose role any principal of the account
        may assume (allowed only with `sandbox_payments_only`; the stack warns of each)."""
        return account_wide_four_eyes_approvers(
            self.approval_thresholds, self.tenants, self.approver_keys
        )

    def approver_keys(self, tenant: str, approver: str) -> ApproverKeyConfig:
        """How `approver` signs for `tenant` (the defaults: a key and a role the stack makes)."""
        return self.approval_keys.get(f"{tenant}/{approver}", ApproverKeyConfig())

    def _check_budget_outlasts_one_run(self) -> None:
        """A task whose retries run out ends the execution FAILED so a redrive can rerun it; if
        one run's deliveries (1 + MaxAttempts) already spend the ledger's lifetime budget, that
        redrive could only ever answer BudgetExhausted."""
        budget = self.ledger.attempt_budget
        for name in LEDGER_GUARDED_CLASSES:
            policy = self.retry.get(name)
            if policy is not None and 1 + policy.max_attempts >= budget:
                raise refused(
                    f"context 'ledger.attempt_budget' ({budget}) must exceed one run of the "
                    f"{name!r} retry policy (1 + MaxAttempts = {1 + policy.max_attempts}), or a "
                    "redrive of a task whose retries ran out could never dispatch again"
                )

    def _check_retention_outlasts_redrives(self) -> None:
        """Every delivery renews a ledger record's retention; an execution closes at most its
        timeout after its last delivery and can be redriven up to 14 days after each close. A
        shorter retention would let a redrive meet a record that expired under it (never
        executed: a late replay)."""
        needed = REDRIVE_WINDOW_SECONDS + self.workflow.execution_timeout_minutes * 60
        if self.ledger.retention_seconds <= needed:
            raise refused(
                f"context 'ledger.retention_days' ({self.ledger.retention_days}) must outlast "
                "the 14-day redrive window after an execution's close plus "
                f"'workflow.execution_timeout_minutes' ({self.workflow.execution_timeout_minutes})"
            )

    def _check_pending_outlasts_a_lease(self) -> None:
        """An ActionPending whose retries all end while the other attempt's lease is live fails
        the execution at that task although the action was about to be decided."""
        lease = self.longest_lease_seconds
        policy = self.pending_policy
        probability = full_jitter_total_wait_below(policy, lease)
        if probability > PENDING_OUTLAST_BOUND:
            raise refused(
                f"context 'retry.{PENDING_CLASS}' retries for too short a time: with FULL "
                f"jitter all {policy.max_attempts} waits end within a lease of {lease} s "
                f"('functions.timeout_seconds' + 'ledger.lease_margin_seconds') with "
                f"probability {float(probability):.2g}, above {float(PENDING_OUTLAST_BOUND):g}; "
                "raise MaxAttempts, IntervalSeconds or MaxDelaySeconds"
            )


_CONTEXT_KEYS = tuple(SagaConfig.model_fields)


def reject_dotted_overrides(context_keys: Iterable[str]) -> None:
    """`cdk -c ledger.attempt_budget=3` sets a key nobody reads: refuse it instead of ignoring
    it silently. A whole section can be given as JSON: `-c 'ledger={"attempt_budget": 9, ...}'`."""
    for key in context_keys:
        section, dot, _ = key.partition(".")
        if dot and section in _CONTEXT_KEYS:
            raise ConfigError(
                f"context {key!r} is not read: nested values are set in cdk.json, or the whole "
                f"'{section}' section is given as JSON (-c '{section}={{...}}')"
            )


__all__ = [
    "DEFAULT_RETRY_ERRORS",
    "LAMBDA_INVOKE_ERRORS",
    "LEDGER_MIN_LEASE_SECONDS",
    "PENDING_ERRORS",
    "PENDING_OUTLAST_BOUND",
    "ConfigError",
    "RetryPolicy",
    "SagaConfig",
    "full_jitter_total_wait_below",
    "reject_dotted_overrides",
]
