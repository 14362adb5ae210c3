"""`sagactl mcp`: the agent tools (saga.agent.tools) served over MCP, stdio or streamable HTTP.

The server is the trusted side: it is started by an operator for one tenant (`--tenant`), and
that tenant is every draft's and every lookup's, whatever an agent sends. It targets the local
AWS or a deployed stack like every sagactl command (sagactl.target): the drafts and cases
tables and the state machine from the outputs, the trusted approval keys from the deployed
ValidateCase function (its APPROVAL_KEYS), so a start is verified exactly as ValidateCase will
verify it. A tool's refusal is an MCP tool error (isError, the code and a sentence); an
unexpected failure is reported the same way as UNAVAILABLE, never as a stack trace.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from saga.agent.drafts import DraftStore
from saga.agent.schemas import tool_definitions
from saga.agent.tools import AgentTools, ErrorCode, ToolError, error_result, success_result
from saga.approvals import ApprovalVerifier, KmsPublicKeys
from saga.cases import CaseRecords
from saga.settings import ConfigurationError, parse_approval_keys
from sagactl.errors import SagactlError, UsageError
from sagactl.signing import APPROVAL_KEYS_OUTPUT, _json_output
from sagactl.target import Target

logger = logging.getLogger(__name__)

SERVER_NAME = "replacement-order-saga"
DRAFTS_OUTPUT = "DraftsTableName"
DEFAULT_HTTP_PORT = 8765
HTTP_PATH = "/mcp"
INSTRUCTIONS = (
    "Tools to replace a customer's damaged item: propose_replacement makes a draft a person "
    "must approve, start_replacement starts an approved one, get_replacement follows it. Give "
    "every request a durable request_id (ticket + step) and reuse it on every retry."
)


def agent_tools(target: Target, tenant: str) -> AgentTools:
    """The tools for `tenant` on this target; SagactlError when the stack cannot serve them."""
    keys = _json_output(target, APPROVAL_KEYS_OUTPUT)
    if tenant not in keys:
        raise UsageError(
            f"tenant {tenant!r} is not configured in this stack (tenants: "
            f"{', '.join(sorted(keys))})"
        )
    from sagactl.commands.case import _validate_case_environment

    name, variables = _validate_case_environment(target)
    try:
        trusted = parse_approval_keys(str(variables.get("APPROVAL_KEYS") or ""))
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read the approval keys of {name}: {exc}") from None
    dynamodb = target.client("dynamodb")
    return AgentTools(
        tenant_id=tenant,
        drafts=DraftStore(dynamodb, drafts_table(target)),
        cases=CaseRecords(dynamodb, target.output("CasesTableName")),
        stepfunctions=target.client("stepfunctions"),
        state_machine_arn=target.state_machine_arn,
        approvals=ApprovalVerifier(trusted, KmsPublicKeys(lambda: target.client("kms"))),
        clock=target.now,
    )


def drafts_table(target: Target) -> str:
    table = target.optional_output(DRAFTS_OUTPUT)
    if table is None:
        where = "the local AWS" if target.local else f"stack {target.stack_name}"
        raise SagactlError(
            f"{where} has no {DRAFTS_OUTPUT} output: it predates the agent tools; deploy the "
            "current stack (or restart `sagactl local up`)"
        )
    return table


def call_tool(tools: AgentTools, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """One tool call as an MCP CallToolResult (camelCase JSON)."""
    try:
        return success_result(tools.call(name, arguments))
    except ToolError as error:
        return error_result(error)
    except Exception:  # never a stack trace to the agent: logged here, a code there
        logger.exception("tool %s failed", name)
        return error_result(
            ToolError(
                ErrorCode.UNAVAILABLE,
                f"{name} failed unexpectedly; nothing more is known: try again later",
            )
        )


def build_server(tools: AgentTools) -> Server[Any]:
    listed = [types.Tool.model_validate(tool) for tool in tool_definitions()]
    schemas = {tool.name: tool.input_schema for tool in listed}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # boto3 is synchronous: a call runs in a worker thread, the loop keeps serving.
        result = await anyio.to_thread.run_sync(call_tool, tools, params.name, params.arguments)
        return types.CallToolResult.model_validate(result)

    return Server(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(server: Server[Any], port: int) -> None:
    """Streamable HTTP on 127.0.0.1 only (the SDK's DNS-rebinding protection for loopback)."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
