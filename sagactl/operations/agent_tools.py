"""The agent tools (saga.agent.tools) for one tenant on a target, as `sagactl mcp` serves them.

The server is the trusted side: the operator starts it for one tenant, and that tenant is every
draft's and every lookup's, whatever an agent sends. The drafts and cases tables and the state
machine come from the target's outputs, the trusted approval keys from the deployed ValidateCase
function (its APPROVAL_KEYS and APPROVAL_THRESHOLDS), so a start is verified exactly as
ValidateCase will verify it.
"""

from __future__ import annotations

from saga.agent.tools import AgentTools
from saga.cases import CaseRecords
from sagactl.errors import UsageError
from sagactl.operations.drafts import draft_store
from sagactl.operations.functions import deployed_verifier
from sagactl.operations.signing import stack_approval_keys
from sagactl.target import Target


def agent_tools(target: Target, tenant: str) -> AgentTools:
    """The tools for `tenant` on this target; SagactlError when the stack cannot serve them."""
    keys = stack_approval_keys(target)
    if tenant not in keys:
        raise UsageError(
            f"tenant {tenant!r} is not configured in this stack (tenants: "
            f"{', '.join(sorted(keys))})"
        )
    _, verifier = deployed_verifier(target)
    return AgentTools(
        tenant_id=tenant,
        drafts=draft_store(target),
        cases=CaseRecords(target.client("dynamodb"), target.output("CasesTableName")),
        stepfunctions=target.client("stepfunctions"),
        state_machine_arn=target.state_machine_arn,
        approvals=verifier,
        clock=target.now,
    )
