"""`sagactl mcp`: serve the agent tools over MCP (stdio, or streamable HTTP on 127.0.0.1).

propose_replacement, get_replacement and start_replacement for one tenant (--tenant: the
server's trusted configuration; an agent never chooses it), against the local AWS
(AWS_ENDPOINT_URL, as `source .local/env` sets it, or --local) or a deployed stack (--stack).
A person approves a proposed case with `sagactl case approve --case CASE_ID`. See the README,
"Use it from an agent".

Where it serves and against what is said on stderr (stdout is the protocol over stdio); with
--http, the URL and a one-line client configuration too.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import socket
import sys
from typing import TYPE_CHECKING, Any

from sagactl.commands import summary
from sagactl.commands.common import Subparsers, add_command, add_target_arguments, resolve_target
from sagactl.errors import TargetError

if TYPE_CHECKING:
    from mcp.server import Server

    from saga.agent.tools import AgentTools

logger = logging.getLogger(__name__)

SERVER_NAME = "replacement-order-saga"
CLIENT_SERVER_KEY = "replacement-saga"  # the server's name in a host's mcpServers
HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8765
HTTP_PATH = "/mcp"
EXIT_CODES = (
    "exit status:\n"
    "  0    stopped: the host closed stdin (stdio), or Ctrl-C / SIGTERM (--http)\n"
    "  1    an error: the port is in use (pass --port), AWS or the local AWS unreachable,\n"
    "       no such stack\n"
    "  2    a usage error"
)
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


def http_url(port: int) -> str:
    return f"http://{HTTP_HOST}:{port}{HTTP_PATH}"


def http_client_config(port: int) -> str:
    """One line an MCP host's configuration takes (`mcpServers`, streamable HTTP)."""
    entry = {"type": "http", "url": http_url(port)}
    return json.dumps({"mcpServers": {CLIENT_SERVER_KEY: entry}})


def listen(port: int) -> socket.socket:
    """The HTTP server's socket, bound and listening before anything is said about it: a port
    another program holds is a TargetError that says what to do."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((HTTP_HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason += " (another program holds the port: stop it, or pass --port)"
        raise TargetError(f"cannot listen on {HTTP_HOST}:{port}: {reason}") from None
    return sock


def serve_http(server: Server[Any], sock: socket.socket) -> None:
    """Streamable HTTP on 127.0.0.1 only (the SDK's DNS-rebinding protection for loopback)."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=HTTP_HOST)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _where(target: Any) -> str:
    if target.local:
        return f"the local AWS at {target.endpoint_url}"
    return f"stack {target.stack_name} in {target.region}"


def command_mcp(args: argparse.Namespace) -> int:
    import anyio

    from sagactl.operations.agent_tools import agent_tools

    sock = listen(args.port) if args.http else None  # first: a busy port ends it at once
    # Not the stack's outputs: the agent's role reads its tenant's configuration only.
    target = resolve_target(args, read_outputs=False)
    server = build_server(agent_tools(target, args.tenant))
    about = f"the agent tools for tenant {args.tenant}, against {_where(target)}"
    if sock is None:
        print(f"sagactl mcp: serving {about} over stdio (an MCP host runs this)", file=sys.stderr)
        anyio.run(serve_stdio, server)
        return 0
    port = sock.getsockname()[1]
    print(
        f"sagactl mcp: serving {about} on {http_url(port)} (streamable HTTP); Ctrl-C stops\n"
        f"client config: {http_client_config(port)}",
        file=sys.stderr,
        flush=True,
    )
    serve_http(server, sock)
    return 0


def register(subparsers: Subparsers) -> None:
    mcp = add_command(
        subparsers,
        "mcp",
        summary("mcp"),
        handler=command_mcp,
        doc=__doc__,
        epilog=EXIT_CODES,
    )
    mcp.add_argument(
        "--tenant", required=True, help="the tenant every tool call acts for (trusted: yours)"
    )
    mcp.add_argument(
        "--http",
        action="store_true",
        help=f"serve streamable HTTP on http://{HTTP_HOST}:PORT{HTTP_PATH} instead of stdio",
    )
    mcp.add_argument(
        "--port", type=int, default=DEFAULT_HTTP_PORT, help="--http port (%(default)s)"
    )
    add_target_arguments(mcp)
