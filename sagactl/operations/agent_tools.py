"""The agent tools (saga.agent.tools) for one tenant on a target, as `sagactl mcp` serves them.

The server is the trusted side: the operator starts it for one tenant, and that tenant is every
draft's and every lookup's, whatever an agent sends. What it serves with is that tenant's agent
configuration (saga.agent.config), one SSM parameter the stack writes and only the tenant's
agent role may read: the drafts and cases tables, the state machine, and the approval keys and
thresholds ValidateCase trusts for the tenant, so a start is verified exactly as ValidateCase
will verify it. Not the stack's outputs nor ValidateCase's environment, which name every
tenant's approvers (docs/design.md §11).

On AWS the parameter's name comes from the stack's (`--stack`): no call but GetParameter.
Locally from the outputs file (`AgentConfigParameters`), then the same GetParameter.
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from saga.agent.config import AGENT_CONFIG_OUTPUT, AgentConfig, agent_config_parameter
from saga.agent.drafts import DraftStore
from saga.agent.tools import AgentTools
from saga.approval_keys import KmsPublicKeys
from saga.cases import CaseRecords
from sagactl.errors import NotFound, SagactlError, UsageError
from sagactl.target import Target


def agent_config_name(target: Target, tenant: str) -> str:
    """The name of `tenant`'s agent configuration parameter on this target."""
    if not target.local:
        return agent_config_parameter(target.stack_name, tenant)
    raw = target.newer_output(AGENT_CONFIG_OUTPUT, "per-tenant agent configuration", SagactlError)
    try:
        names = json.loads(raw)
    except ValueError:
        raise SagactlError(f"the {AGENT_CONFIG_OUTPUT} output is not JSON") from None
    if not isinstance(names, dict) or tenant not in names:
        tenants = ", ".join(sorted(names)) if isinstance(names, dict) else "none"
        raise UsageError(
            f"tenant {tenant!r} is not configured in the local AWS (tenants: {tenants})"
        )
    return str(names[tenant])


def agent_config(target: Target, tenant: str) -> AgentConfig:
    """`tenant`'s agent configuration, read with one GetParameter; SagactlError when there is
    none or it is malformed."""
    name = agent_config_name(target, tenant)
    try:
        value = target.client("ssm").get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
        where = "the local AWS" if target.local else f"stack {target.stack_name}"
        raise NotFound(
            f"{where} has no agent configuration for tenant {tenant!r} (parameter {name}): "
            "name a tenant the stack configures, or deploy the current stack (one deployed "
            "before per-tenant agent configuration has none)"
        ) from None
    try:
        config = AgentConfig.parse(str(value))
    except ValueError as exc:
        raise SagactlError(f"the agent configuration {name} is malformed: {exc}") from None
    if config.tenant_id != tenant:
        raise SagactlError(f"the agent configuration {name} is tenant {config.tenant_id!r}'s")
    return config


def agent_tools(target: Target, tenant: str) -> AgentTools:
    """The tools for `tenant` on this target; SagactlError when the stack cannot serve them."""
    config = agent_config(target, tenant)
    dynamodb = target.client("dynamodb")
    return AgentTools(
        tenant_id=tenant,
        drafts=DraftStore(
            dynamodb, config.drafts_table, legacy_table_name=config.legacy_drafts_table
        ),
        cases=CaseRecords(dynamodb, config.cases_table),
        stepfunctions=target.client("stepfunctions"),
        state_machine_arn=config.state_machine_arn,
        approvals=config.verifier(KmsPublicKeys(lambda: target.client("kms"))),
        clock=target.now,
    )
