"""The stack's configuration as sagactl uses it: cdk.json, read as `cdk synth` reads it.

Who may approve for which tenant, and the ledger's attempt budget shown next to each record,
come from here unless the deployed stack says otherwise (the approvers of the ValidateCase
function's APPROVAL_KEYS, the stack's `AttemptBudget` output).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from saga.four_eyes import case_approvals_required
from saga.ledger import LedgerPolicy
from saga.models import Case
from sagactl.errors import SagactlError
from sagactl.paths import CDK_JSON
from sagactl.target import Target
from stacks.config import ConfigError, SagaConfig


@dataclass(frozen=True)
class Tenants:
    """Who may approve cases for which tenant, the tenants' four-eyes thresholds (saga.four_eyes),
    and where that was read."""

    approvers: Mapping[str, frozenset[str]]
    source: str
    thresholds: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def configured(self, tenant: object) -> str:
        """Where the refusal of `tenant` or of its approver was read, and what is configured
        there: the tenants when it is not one, else its approvers."""
        approvers = self.approvers.get(tenant) if isinstance(tenant, str) else None
        if approvers is None:
            return f"tenants from {self.source}: {', '.join(sorted(self.approvers))}"
        return f"approvers of {tenant} in {self.source}: {', '.join(sorted(approvers))}"

    def approvals_required(self, case: Case) -> int:
        """How many distinct approvers `case` needs under these thresholds."""
        return case_approvals_required(self.thresholds, case)


def cdk_config() -> SagaConfig:
    """The stack's configuration as `cdk synth` (and so `sagactl local up`) reads it from
    cdk.json, without `-c` overrides."""
    try:
        context = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
        return SagaConfig.from_mapping(context)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # ConfigError is a ValueError
        detail = exc if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        raise SagactlError(f"cannot read the configuration in {CDK_JSON}: {detail}") from None


def configured_tenants() -> Tenants:
    """Who may approve for which tenant, as cdk.json configures ValidateCase."""
    config = cdk_config()
    approvers = {t: frozenset(a) for t, a in config.tenants.items()}
    return Tenants(approvers, "cdk.json", config.approval_thresholds)


def default_attempt_budget() -> int:
    """The ledger's lifetime attempt budget from cdk.json (the one config place); the ledger's
    own default when cdk.json cannot be read."""
    try:
        return cdk_config().ledger.attempt_budget
    except SagactlError:
        return LedgerPolicy().attempt_budget


def resolve_budget(target: Target, override: int | None = None) -> int:
    """--budget, else the stack's `AttemptBudget` output when it has one, else cdk.json."""
    if override:
        return override
    declared = target.optional_output("AttemptBudget")
    if declared and declared.isdigit():
        return int(declared)
    return default_attempt_budget()
