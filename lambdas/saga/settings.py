"""Settings.from_env(): table names and policy values from the environment (docs/architecture.md).

Each function gets only the variables it needs from the stack, so table names are read lazily:
asking for one that is not set raises `ConfigurationError` naming the variable. Policy values have
the ledger's defaults and are parsed eagerly, so a malformed value fails at once with its name.
`ConfigurationError` is deliberately not a `SagaError`: a misconfigured function is a deployment
fault the workflow must not route as a business outcome (the execution fails and can be redriven
after the fix).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from saga.ledger import LedgerPolicy

# Library defaults (one place: LedgerPolicy). A deployed function always gets cdk.json's values
# through its environment; these only apply where no environment says otherwise (tests, REPL).
DEFAULT_LEASE_MARGIN_SECONDS = LedgerPolicy.lease_margin_seconds
DEFAULT_ATTEMPT_BUDGET = LedgerPolicy.attempt_budget
DEFAULT_RETENTION_SECONDS = LedgerPolicy.retention_seconds
DEFAULT_PAYMENT_KEY_RETENTION_SECONDS = 86400
DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS = 5.0

TABLE_VARIABLES = (
    "LEDGER_TABLE",
    "CASES_TABLE",
    "INVENTORY_TABLE",
    "RESERVATIONS_TABLE",
    "PAYMENTS_TABLE",
    "SHIPMENTS_TABLE",
    "SANDBOX_TABLE",
)


class ConfigurationError(RuntimeError):
    """A required environment variable is missing or malformed."""


@dataclass(frozen=True)
class Settings:
    tables: Mapping[str, str] = field(default_factory=dict)
    escalation_queue_url: str | None = None
    tenants_json: str | None = None
    lease_margin_seconds: int = DEFAULT_LEASE_MARGIN_SECONDS
    attempt_budget: int = DEFAULT_ATTEMPT_BUDGET
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    payment_key_retention_seconds: int = DEFAULT_PAYMENT_KEY_RETENTION_SECONDS
    downstream_timeout_seconds: float = DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            tables={name: env[name] for name in TABLE_VARIABLES if env.get(name)},
            escalation_queue_url=env.get("ESCALATION_QUEUE_URL") or None,
            tenants_json=env.get("TENANTS") or None,
            lease_margin_seconds=_int(env, "LEASE_MARGIN_SECONDS", DEFAULT_LEASE_MARGIN_SECONDS, 0),
            attempt_budget=_int(env, "ATTEMPT_BUDGET", DEFAULT_ATTEMPT_BUDGET, 1),
            retention_seconds=_int(env, "RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS, 1),
            payment_key_retention_seconds=_int(
                env, "PAYMENT_KEY_RETENTION_SECONDS", DEFAULT_PAYMENT_KEY_RETENTION_SECONDS, 1
            ),
            downstream_timeout_seconds=_positive_float(
                env, "DOWNSTREAM_TIMEOUT_SECONDS", DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS
            ),
        )

    # --- tables (required only by the functions that use them) --------------------------------
    def table(self, variable: str) -> str:
        if variable not in TABLE_VARIABLES:
            raise ValueError(f"not a table variable: {variable}")
        name = self.tables.get(variable)
        if not name:
            raise ConfigurationError(
                f"environment variable {variable} is required by this function but not set"
            )
        return name

    @property
    def ledger_table(self) -> str:
        return self.table("LEDGER_TABLE")

    @property
    def cases_table(self) -> str:
        return self.table("CASES_TABLE")

    @property
    def inventory_table(self) -> str:
        return self.table("INVENTORY_TABLE")

    @property
    def reservations_table(self) -> str:
        return self.table("RESERVATIONS_TABLE")

    @property
    def payments_table(self) -> str:
        return self.table("PAYMENTS_TABLE")

    @property
    def shipments_table(self) -> str:
        return self.table("SHIPMENTS_TABLE")

    @property
    def sandbox_table(self) -> str:
        return self.table("SANDBOX_TABLE")

    @property
    def escalation_queue(self) -> str:
        if not self.escalation_queue_url:
            raise ConfigurationError(
                "environment variable ESCALATION_QUEUE_URL is required by this function but not set"
            )
        return self.escalation_queue_url

    # --- trusted configuration ------------------------------------------------------------------
    @property
    def tenants(self) -> dict[str, frozenset[str]]:
        """TENANTS: `{"tenant": ["approver", ...]}`, who may approve for which tenant."""
        if not self.tenants_json:
            raise ConfigurationError(
                "environment variable TENANTS is required by this function but not set"
            )
        return parse_tenants(self.tenants_json)

    def ledger_policy(self) -> LedgerPolicy:
        from saga.ledger import LedgerPolicy

        return LedgerPolicy(
            attempt_budget=self.attempt_budget,
            retention_seconds=self.retention_seconds,
            lease_margin_seconds=self.lease_margin_seconds,
        )


def parse_tenants(raw: str) -> dict[str, frozenset[str]]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"TENANTS is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ConfigurationError('TENANTS must be a JSON object {"tenant": ["approver", ...]}')
    tenants: dict[str, frozenset[str]] = {}
    for tenant, approvers in value.items():
        if not isinstance(approvers, list) or not all(isinstance(a, str) for a in approvers):
            raise ConfigurationError(f"TENANTS[{tenant!r}] must be a list of approver strings")
        tenants[tenant] = frozenset(approvers)
    return tenants


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")
    return value


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
    if not value > 0:
        raise ConfigurationError(f"{name} must be positive, got {raw!r}")
    return value
