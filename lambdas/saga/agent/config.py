"""What the agent tools of one tenant are served with (docs/design.md §10, §11): that tenant's
trusted configuration and nothing of any other tenant's.

The stack writes it as one SSM parameter per tenant (`/<stack>/agents/<tenant>/config`,
stacks/constructs/agent_config.py), which only that tenant's agent role may read, and
`sagactl mcp --tenant T` reads it with one GetParameter. Before, the server read the stack's
outputs (DescribeStacks) and ValidateCase's environment (GetFunctionConfiguration): every
tenant's approvers, key references and thresholds, handed to every agent role. The values are
ValidateCase's own (APPROVAL_KEYS, APPROVAL_KEY_ALIASES and APPROVAL_THRESHOLDS, rendered from
the same configuration by the same stack), cut to the tenant, so a start is verified exactly as
ValidateCase will verify it.

Not read by the Lambda code: AgentToolsFunction (behind AgentCore Gateway) keeps its own
environment.
"""

from __future__ import annotations

import json
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from saga.approval_keys import PublicKeySource, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.four_eyes import FOUR_EYES, parse_thresholds
from saga.models import TENANT_ID_PATTERN

# The stack output naming each tenant's parameter (tenant -> name), for the operator and the local
# AWS; on AWS an agent role cannot read the outputs and computes the name (agent_config_parameter).
AGENT_CONFIG_OUTPUT = "AgentConfigParameters"
# SSM's limit for a standard parameter's value (stacks/environment_budget.py checks it at synth).
PARAMETER_VALUE_LIMIT = 4096


def agent_config_parameter(stack_name: str, tenant_id: str) -> str:
    """The name of the parameter holding `tenant_id`'s agent configuration in stack
    `stack_name` (a tenant id is letters, digits and hyphens: a valid path segment)."""
    return f"/{stack_name}/agents/{tenant_id}/config"


class AgentConfig(BaseModel):
    """One tenant's agent configuration, as the parameter holds it (JSON, these field names)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(pattern=TENANT_ID_PATTERN)
    state_machine_arn: str = Field(min_length=1)
    cases_table: str = Field(min_length=1)
    drafts_table: str = Field(min_length=1)
    legacy_drafts_table: str = Field(min_length=1)
    # This tenant's APPROVAL_KEYS entry: approver -> generations or {current, retired}.
    approval_keys: dict[str, Any]
    # The alias prefix of the keys the stack created (APPROVAL_KEY_ALIASES), when it did.
    approval_key_aliases: str | None = None
    # This tenant's APPROVAL_THRESHOLDS entry (currency -> minor units; {}: one approver).
    approval_thresholds: dict[str, int]

    @model_validator(mode="after")
    def _keys_and_thresholds(self) -> Self:
        if not self.approval_keys:
            raise ValueError(f"tenant {self.tenant_id} has no approvers")
        self.trusted_keys()  # ValueError naming what is wrong
        if self.approval_thresholds:
            parse_thresholds({self.tenant_id: self.approval_thresholds})
            if len(self.approval_keys) < FOUR_EYES:
                raise ValueError(
                    f"four eyes needs at least {FOUR_EYES} approvers of tenant {self.tenant_id}"
                )
        return self

    def trusted_keys(self) -> dict[str, Any]:
        return parse_trusted_keys({self.tenant_id: self.approval_keys}, self.approval_key_aliases)

    def verifier(self, public_keys: PublicKeySource) -> ApprovalVerifier:
        """The verifier ValidateCase would build, for this tenant alone."""
        thresholds = {self.tenant_id: self.approval_thresholds} if self.approval_thresholds else {}
        return ApprovalVerifier(self.trusted_keys(), public_keys, thresholds=thresholds)

    @classmethod
    def parse(cls, text: str) -> AgentConfig:
        """The parameter's value; ValueError naming what is wrong."""
        try:
            return cls.model_validate(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc.msg}") from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'the value'}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ValueError(problems) from None
