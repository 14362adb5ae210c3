"""SagaConfig: the typed view of the cdk context, the one configuration place (design.md §4).

Every policy value the stack and the state machine use comes from here: retry policies, task
timeouts, lease margin, attempt budget, retention, sandbox on/off. `SagaConfig.from_context`
reads a plain mapping (what `node.try_get_context` returns for each key) and raises
`ConfigError` naming the offending key when a value is missing or wrong, so a bad `cdk.json`
or `-c key=value` fails the synth with a clear message instead of deploying nonsense.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

# Lambda invoke-level faults (design.md §4): the invoke itself failed, the tool never decided.
# Invoke-level faults AWS recommends retrying: the function did not run, or ran and its answer
# was lost on the way back; every tool is ledger-guarded, so a repeat is decided by the ledger.
LAMBDA_INVOKE_ERRORS: tuple[str, ...] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
)
DEFAULT_RETRY_ERRORS: tuple[str, ...] = ("TransientError", *LAMBDA_INVOKE_ERRORS)
PENDING_ERRORS: tuple[str, ...] = ("ActionPending",)
REDRIVE_WINDOW_SECONDS = 14 * 86_400  # Step Functions redrives within 14 days of a close
PENDING_CLASS = "pending"
# Retry classes of tasks whose every delivery counts against the ledger's lifetime budget.
LEDGER_GUARDED_CLASSES = ("tool", "compensation")
DEFAULT_CLASS_KEY = "default"

# The pending retrier's last retry may still meet a live lease with at most this probability.
PENDING_OUTLAST_BOUND = Fraction(1, 1000)
# saga.ledger.LedgerPolicy.min_lease_seconds: no lease is shorter (tests pin the two together).
LEDGER_MIN_LEASE_SECONDS = 5
# Retries beyond these are left out of the probability: fewer waits only make it larger.
_JITTER_RETRIES_COUNTED = 64

# Step Functions limits on retrier fields.
_MAX_RETRY_ATTEMPTS = 99_999_999
_MAX_DELAY_SECONDS = 31_622_400
_STAGE_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_CONTEXT_KEYS = (
    "stage",
    "sandbox",
    "retain_data_stages",
    "tenants",
    "ledger",
    "payment_key_retention_hours",
    "downstream_timeout_seconds",
    "functions",
    "workflow",
    "retry",
    "task_retry_class",
    "monitoring",
)
_LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557}
    | {2922, 3288, 3653}
)


class ConfigError(ValueError):
    """A cdk context value is missing or invalid; the message names the key."""


@dataclass(frozen=True)
class RetryPolicy:
    """One retrier of the ASL, minus ErrorEquals' placement: JitterStrategy is always FULL."""

    name: str
    error_equals: tuple[str, ...]
    interval_seconds: int
    max_attempts: int
    backoff_rate: float
    max_delay_seconds: int

    def jitter_caps(self) -> list[float]:
        """FULL jitter's upper bound of each retry's wait: min(MaxDelay, Interval * Backoff**n)."""
        return [
            min(float(self.max_delay_seconds), self.interval_seconds * self.backoff_rate**n)
            for n in range(self.max_attempts)
        ]

    def to_retrier(self, error_equals: Sequence[str] | None = None) -> dict[str, Any]:
        """The ASL Retry entry, with all six fields."""
        return {
            "ErrorEquals": list(error_equals if error_equals is not None else self.error_equals),
            "IntervalSeconds": self.interval_seconds,
            "MaxAttempts": self.max_attempts,
            "BackoffRate": self.backoff_rate,
            "MaxDelaySeconds": self.max_delay_seconds,
            "JitterStrategy": "FULL",
        }


@dataclass(frozen=True)
class LedgerConfig:
    attempt_budget: int
    retention_days: int
    lease_margin_seconds: int

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86_400


@dataclass(frozen=True)
class FunctionsConfig:
    timeout_seconds: int
    memory_mb: int
    log_retention_days: int
    log_level: str


@dataclass(frozen=True)
class WorkflowConfig:
    execution_timeout_minutes: int
    # Shorter than the function timeout on purpose: a hung tool surfaces as States.Timeout
    # (caught -> reconciliation) rather than as Lambda's own Sandbox.Timedout error.
    lambda_task_timeout_seconds: int
    service_task_timeout_seconds: int


@dataclass(frozen=True)
class MonitoringConfig:
    sweep_every_minutes: int
    escalation_age_alarm_minutes: int
    # An open action whose lease ended longer ago than this is stuck (the workflow's own
    # retries and reconciliation have had their chance).
    stuck_grace_seconds: int


@dataclass(frozen=True)
class SagaConfig:
    stage: str
    sandbox: bool
    retain_data: bool
    tenants: Mapping[str, tuple[str, ...]]
    ledger: LedgerConfig
    payment_key_retention_hours: int
    downstream_timeout_seconds: int
    functions: FunctionsConfig
    workflow: WorkflowConfig
    retry: Mapping[str, RetryPolicy]
    task_retry_class: Mapping[str, str]
    monitoring: MonitoringConfig

    @property
    def stack_name(self) -> str:
        return f"ReplacementOrderSaga-{self.stage}"

    @property
    def tenants_json(self) -> str:
        """The TENANTS environment value: `{"tenant": ["approver", ...]}`."""
        return json.dumps({t: list(a) for t, a in self.tenants.items()}, sort_keys=True)

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
        """The longest lease a delivery holds: its remaining time (at most the function
        timeout) plus the lease margin (saga.ledger.LedgerPolicy.lease_seconds)."""
        return max(
            LEDGER_MIN_LEASE_SECONDS,
            self.functions.timeout_seconds + self.ledger.lease_margin_seconds,
        )

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> SagaConfig:
        """Build from a context getter (`app.node.try_get_context`); raises ConfigError."""
        raw = {key: get(key) for key in _CONTEXT_KEYS}
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SagaConfig:
        stage = raw.get("stage") or "dev"
        if not isinstance(stage, str) or not _STAGE_PATTERN.match(stage):
            raise ConfigError(
                f"context 'stage' must match {_STAGE_PATTERN.pattern} (it names the stack and "
                f"its resources), got {stage!r}"
            )
        retain_raw = raw.get("retain_data_stages")
        retain_stages = _string_list(
            ["prod"] if retain_raw is None else retain_raw, "retain_data_stages"
        )
        ledger = _section(raw, "ledger")
        functions = _section(raw, "functions")
        workflow = _section(raw, "workflow")
        monitoring = _section(raw, "monitoring")
        config = cls(
            stage=stage,
            sandbox=_boolean(True if raw.get("sandbox") is None else raw["sandbox"], "sandbox"),
            retain_data=stage in retain_stages,
            tenants=_tenants(raw.get("tenants")),
            ledger=LedgerConfig(
                attempt_budget=_positive_int(ledger, "attempt_budget", "ledger"),
                retention_days=_positive_int(ledger, "retention_days", "ledger"),
                lease_margin_seconds=_positive_int(ledger, "lease_margin_seconds", "ledger"),
            ),
            payment_key_retention_hours=_positive_int(raw, "payment_key_retention_hours"),
            downstream_timeout_seconds=_positive_int(raw, "downstream_timeout_seconds"),
            functions=FunctionsConfig(
                timeout_seconds=_positive_int(functions, "timeout_seconds", "functions", 900),
                memory_mb=_positive_int(functions, "memory_mb", "functions", 10_240),
                log_retention_days=_log_retention(functions),
                log_level=_log_level(functions),
            ),
            workflow=WorkflowConfig(
                execution_timeout_minutes=_positive_int(
                    workflow, "execution_timeout_minutes", "workflow", 525_600
                ),
                lambda_task_timeout_seconds=_positive_int(
                    workflow, "lambda_task_timeout_seconds", "workflow"
                ),
                service_task_timeout_seconds=_positive_int(
                    workflow, "service_task_timeout_seconds", "workflow"
                ),
            ),
            retry=_retry_policies(raw.get("retry")),
            task_retry_class=_task_retry_class(raw.get("task_retry_class")),
            monitoring=MonitoringConfig(
                # The sweeper alarms look at two intervals; an alarm's window is at most a day.
                sweep_every_minutes=_positive_int(
                    monitoring, "sweep_every_minutes", "monitoring", 720
                ),
                escalation_age_alarm_minutes=_positive_int(
                    monitoring, "escalation_age_alarm_minutes", "monitoring"
                ),
                stuck_grace_seconds=_positive_int(monitoring, "stuck_grace_seconds", "monitoring"),
            ),
        )
        config._check_consistency()
        return config

    def _check_consistency(self) -> None:
        if self.workflow.lambda_task_timeout_seconds >= self.functions.timeout_seconds:
            raise ConfigError(
                "context 'workflow.lambda_task_timeout_seconds' "
                f"({self.workflow.lambda_task_timeout_seconds}) must be shorter than "
                f"'functions.timeout_seconds' ({self.functions.timeout_seconds}) so a hung tool "
                "surfaces as States.Timeout and goes to reconciliation"
            )
        if self.downstream_timeout_seconds >= self.functions.timeout_seconds:
            raise ConfigError(
                f"context 'downstream_timeout_seconds' ({self.downstream_timeout_seconds}) must "
                f"fit inside 'functions.timeout_seconds' ({self.functions.timeout_seconds})"
            )
        if PENDING_CLASS not in self.retry:
            raise ConfigError(f"context 'retry' must define the {PENDING_CLASS!r} policy")
        pending = set(self.retry[PENDING_CLASS].error_equals)
        for name, policy in self.retry.items():
            if name != PENDING_CLASS and pending & set(policy.error_equals):
                raise ConfigError(
                    f"context 'retry.{name}.ErrorEquals' must not list {sorted(pending)}: "
                    f"those are retried by the {PENDING_CLASS!r} policy"
                )
        self._check_budget_outlasts_one_run()
        self._check_retention_outlasts_redrives()
        self._check_pending_outlasts_a_lease()
        for key, class_name in self.task_retry_class.items():
            if class_name not in self.retry:
                raise ConfigError(
                    f"context 'task_retry_class.{key}' names unknown retry policy "
                    f"{class_name!r}; known: {sorted(self.retry)}"
                )

    def _check_budget_outlasts_one_run(self) -> None:
        """A task whose retries run out ends the execution FAILED so a redrive can rerun it; if
        one run's deliveries (1 + MaxAttempts) already spend the ledger's lifetime budget, that
        redrive could only ever answer BudgetExhausted."""
        budget = self.ledger.attempt_budget
        for name in LEDGER_GUARDED_CLASSES:
            policy = self.retry.get(name)
            if policy is not None and 1 + policy.max_attempts >= budget:
                raise ConfigError(
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
            raise ConfigError(
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
            raise ConfigError(
                f"context 'retry.{PENDING_CLASS}' retries for too short a time: with FULL "
                f"jitter all {policy.max_attempts} waits end within a lease of {lease} s "
                f"('functions.timeout_seconds' + 'ledger.lease_margin_seconds') with "
                f"probability {float(probability):.2g}, above {float(PENDING_OUTLAST_BOUND):g}; "
                "raise MaxAttempts, IntervalSeconds or MaxDelaySeconds"
            )


def full_jitter_total_wait_below(policy: RetryPolicy, seconds: int) -> Fraction:
    """P(the retries' FULL-jitter waits add up to less than `seconds`), exactly, as a fraction.

    The waits are independent, uniform on [0, c_n] (RetryPolicy.jitter_caps). For uniform
    summands, P(sum < t) = sum over subsets J of (-1)^|J| (t - sum_J c)_+^n / (n! prod c) (the
    volume of the box [0, c_1] x ... x [0, c_n] below the plane sum = t). Terms are grouped by
    sum_J c, which takes fewer than t values once the caps are whole seconds. Caps are rounded
    down to whole seconds and only the first 64 retries count: both can only make waits
    shorter, so the result is exact for cdk.json's whole-second policies and otherwise an upper
    bound. Zero retries never wait long enough: 1.
    """
    caps = [math.floor(c) for c in policy.jitter_caps()[:_JITTER_RETRIES_COUNTED]]
    if not caps:
        return Fraction(1)
    # coefficients[s] = sum over subsets J with sum_J c = s of (-1)^|J|; s < seconds only.
    coefficients = {0: 1}
    for cap in caps:
        if cap >= seconds:
            continue  # a subset containing it sums past `seconds`: its terms vanish
        grown = dict(coefficients)
        for total, coefficient in coefficients.items():
            if total + cap < seconds:
                grown[total + cap] = grown.get(total + cap, 0) - coefficient
        coefficients = grown
    n = len(caps)
    volume = sum(c * (seconds - total) ** n for total, c in coefficients.items())
    return min(Fraction(1), Fraction(volume, math.factorial(n) * math.prod(caps)))


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


def _from_json(value: Any) -> Any:
    """`-c section={...}` from the CDK CLI arrives as a string: read it as JSON (a string that
    is not JSON is returned as is, for the caller's own error)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _section(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = _from_json(raw.get(key))
    if not isinstance(value, Mapping):
        raise ConfigError(f"context '{key}' must be an object, got {value!r}")
    return value


def _where(key: str, section: str | None) -> str:
    return f"{section}.{key}" if section else key


def _positive_int(
    raw: Mapping[str, Any], key: str, section: str | None = None, maximum: int | None = None
) -> int:
    value = raw.get(key)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # `-c key=30` arrives as a string
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(
            f"context '{_where(key, section)}' must be a positive integer, got {value!r}"
        )
    if maximum is not None and value > maximum:
        raise ConfigError(f"context '{_where(key, section)}' must be <= {maximum}, got {value}")
    return value


def _boolean(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise ConfigError(f"context '{key}' must be true or false, got {value!r}")


def _string_list(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = json.loads(value) if value.startswith("[") else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"context '{key}' must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _tenants(value: Any) -> Mapping[str, tuple[str, ...]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"context 'tenants' is not valid JSON: {exc}") from exc
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            "context 'tenants' must be a non-empty object {tenant: [approver, ...]}, "
            f"got {value!r}"
        )
    tenants: dict[str, tuple[str, ...]] = {}
    for tenant, approvers in value.items():
        if not isinstance(tenant, str) or not tenant or "#" in tenant:
            raise ConfigError(
                f"context 'tenants' key {tenant!r} must be a non-empty string without '#' "
                "(it is part of the action key)"
            )
        tenants[tenant] = _string_list(approvers, f"tenants.{tenant}")
    return MappingProxyType(tenants)


def _log_retention(functions: Mapping[str, Any]) -> int:
    days = _positive_int(functions, "log_retention_days", "functions")
    if days not in _LOG_RETENTION_DAYS:
        raise ConfigError(
            f"context 'functions.log_retention_days' must be one of CloudWatch's values "
            f"{sorted(_LOG_RETENTION_DAYS)}, got {days}"
        )
    return days


def _log_level(functions: Mapping[str, Any]) -> str:
    level = functions.get("log_level", "INFO")
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ConfigError(
            f"context 'functions.log_level' must be DEBUG, INFO, WARNING or ERROR, got {level!r}"
        )
    return str(level)


def _retry_policies(value: Any) -> Mapping[str, RetryPolicy]:
    value = _from_json(value)
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"context 'retry' must be an object of named policies, got {value!r}")
    return MappingProxyType({name: _retry_policy(name, spec) for name, spec in value.items()})


def _retry_policy(name: str, spec: Any) -> RetryPolicy:
    where = f"retry.{name}"
    if not isinstance(spec, Mapping):
        raise ConfigError(f"context '{where}' must be an object, got {spec!r}")
    allowed = {"IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "ErrorEquals"}
    unknown = set(spec) - allowed
    if unknown:
        raise ConfigError(
            f"context '{where}' has unknown fields {sorted(unknown)}; allowed: {sorted(allowed)} "
            "(JitterStrategy is always FULL)"
        )
    max_attempts = spec.get("MaxAttempts")
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 0 <= max_attempts <= _MAX_RETRY_ATTEMPTS
    ):
        raise ConfigError(
            f"context '{where}.MaxAttempts' must be an integer in 0..{_MAX_RETRY_ATTEMPTS}, "
            f"got {max_attempts!r}"
        )
    backoff = spec.get("BackoffRate")
    if isinstance(backoff, bool) or not isinstance(backoff, int | float) or backoff < 1.0:
        raise ConfigError(f"context '{where}.BackoffRate' must be a number >= 1.0, got {backoff!r}")
    interval = _positive_int(spec, "IntervalSeconds", where, _MAX_DELAY_SECONDS)
    max_delay = _positive_int(spec, "MaxDelaySeconds", where, _MAX_DELAY_SECONDS)
    if max_delay < interval:
        raise ConfigError(
            f"context '{where}.MaxDelaySeconds' ({max_delay}) must be >= IntervalSeconds "
            f"({interval})"
        )
    if name == PENDING_CLASS:
        default_errors: tuple[str, ...] = PENDING_ERRORS
    else:
        default_errors = DEFAULT_RETRY_ERRORS
    errors = _string_list(spec.get("ErrorEquals", list(default_errors)), f"{where}.ErrorEquals")
    if "States.ALL" in errors:
        raise ConfigError(
            f"context '{where}.ErrorEquals' must not use States.ALL: rejections and uncertain "
            "outcomes are never blindly retried (design.md §4)"
        )
    return RetryPolicy(
        name=name,
        error_equals=errors,
        interval_seconds=interval,
        max_attempts=max_attempts,
        backoff_rate=float(backoff),
        max_delay_seconds=max_delay,
    )


def _task_retry_class(value: Any) -> Mapping[str, str]:
    value = _from_json(value)
    if not isinstance(value, Mapping) or DEFAULT_CLASS_KEY not in value:
        raise ConfigError(
            "context 'task_retry_class' must be an object mapping state names or substitution "
            f"names to retry policy names, with a {DEFAULT_CLASS_KEY!r} entry; got {value!r}"
        )
    for key, class_name in value.items():
        if not isinstance(class_name, str):
            raise ConfigError(
                f"context 'task_retry_class.{key}' must be a policy name, got {class_name!r}"
            )
    return MappingProxyType(dict(value))
