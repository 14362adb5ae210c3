"""AgentToolsFunction: the agent tools behind an AgentCore Gateway Lambda target.

The event is the tool's arguments; the tool and the target come from the client context
(saga.agent.gateway); the tenant from AGENT_TARGETS. The answer is MCP's CallToolResult shape,
readable whether the Gateway passes it through or wraps it as text (gateway_answer): a tool
error is `isError` with its code and sentence, never a stack trace.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from saga.agent.drafts import DraftStore
from saga.agent.gateway import gateway_answer, gateway_call, tenant_of
from saga.agent.tools import AgentTools, ErrorCode, ToolError, error_result, success_result
from saga.coldstart import resumed_collection
from saga.observability import logger
from saga.settings import AgentToolsEnvironment
from saga.tools.wiring import Runtime


@resumed_collection
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime = Runtime.from_env(AgentToolsEnvironment)
    env = runtime.variables(AgentToolsEnvironment)
    try:
        target, tool = gateway_call(context)
        tools = AgentTools(
            tenant_id=tenant_of(target, env.agent_targets),
            drafts=DraftStore(
                runtime.client, env.drafts_table, legacy_table_name=env.legacy_drafts_table
            ),
            cases=runtime.cases(),
            stepfunctions=runtime.stepfunctions,
            state_machine_arn=env.state_machine_arn,
            approvals=runtime.approvals,
        )
        logger.append_keys(tool=tool, target=target)
        result = success_result(tools.call(tool, event if isinstance(event, dict) else None))
    except ToolError as error:
        logger.info("tool refused", extra={"code": error.code.value})
        result = error_result(error)
    except Exception:  # a bug or a fault: logged with its trace here, a code for the agent
        logger.exception("tool failed")
        result = error_result(
            ToolError(ErrorCode.UNAVAILABLE, "the tool failed unexpectedly; try again later")
        )
    return gateway_answer(result)
