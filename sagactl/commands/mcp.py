"""`sagactl mcp`: serve the agent tools over MCP (stdio, or streamable HTTP on 127.0.0.1).

propose_replacement, get_replacement and start_replacement for one tenant (--tenant: the
server's trusted configuration; an agent never chooses it), against the local AWS
(AWS_ENDPOINT_URL, as `sagactl local up` prints it) or a deployed stack (--stack). A person
approves a proposed case with `sagactl case approve --case CASE_ID`. See the README, "Use it
from an agent".
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from sagactl.commands.common import Subparsers, add_command, add_target_arguments, resolve_target

if TYPE_CHECKING:
    from mcp.server import Server

    from saga.agent.tools import AgentTools

logger = logging.getLogger(__name__)

SERVER_NAME = "replacement-order-saga"
DEFAULT_HTTP_PORT = 8765
HTTP_PATH = "/mcp"
INSTRUCTIONS = (
    "Tools to replace a customer's damaged item: propose_replacement makes a draft a person "
    "must approve, start_replacement starts an approved one, get_replacement follows it. Give "
    "every request a durable request_id (ticket + step) and reuse it on every retry."
)


def call_tool(tools: AgentTools, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """One tool call as an MCP CallToolResult (camelCase JSON): a refusal is a tool error with
    its code; an unexpected failure is logged here and answered as UNAVAILABLE, never as a
    stack trace."""
    from saga.agent.tools import ErrorCode, ToolError, error_result, success_result

    try:
        return success_result(tools.call(name, arguments))
    except ToolError as error:
        return error_result(error)
    except Exception:
        logger.exception("tool %s failed", name)
        return error_result(
            ToolError(
                ErrorCode.UNAVAILABLE,
                f"{name} failed unexpectedly; nothing more is known: try again later",
            )
        )


def build_server(tools: AgentTools) -> Server[Any]:
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext

    from saga.agent.schemas import tool_definitions

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


def command_mcp(args: argparse.Namespace) -> int:
    import anyio

    from sagactl.operations.agent_tools import agent_tools

    server = build_server(agent_tools(resolve_target(args), args.tenant))
    if args.http:
        serve_http(server, args.port)
    else:
        anyio.run(serve_stdio, server)
    return 0


def register(subparsers: Subparsers) -> None:
    mcp = add_command(
        subparsers,
        "mcp",
        "serve the agent tools (propose, get, start a replacement) over MCP",
        handler=command_mcp,
        doc=__doc__,
    )
    mcp.add_argument(
        "--tenant", required=True, help="the tenant every tool call acts for (trusted: yours)"
    )
    mcp.add_argument(
        "--http",
        action="store_true",
        help=f"serve streamable HTTP on http://127.0.0.1:PORT{HTTP_PATH} instead of stdio",
    )
    mcp.add_argument(
        "--port", type=int, default=DEFAULT_HTTP_PORT, help="--http port (%(default)s)"
    )
    add_target_arguments(mcp)
