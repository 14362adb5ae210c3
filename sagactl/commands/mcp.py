"""`sagactl mcp`: serve the agent tools over MCP (stdio, or streamable HTTP on 127.0.0.1).

propose_replacement, get_replacement and start_replacement for one tenant (--tenant: the
server's trusted configuration; an agent never chooses it), against the local AWS
(AWS_ENDPOINT_URL, as `sagactl local up` prints it) or a deployed stack (--stack). A person
approves a proposed case with `sagactl case approve --case CASE_ID`. See the README, "Use it
from an agent".
"""

from __future__ import annotations

import argparse

import anyio

from sagactl.commands.common import Subparsers
from sagactl.errors import guarded
from sagactl.target import add_target_arguments, resolve_target


def command_mcp(args: argparse.Namespace) -> int:
    from sagactl.agent_server import agent_tools, build_server, serve_http, serve_stdio

    server = build_server(agent_tools(resolve_target(args), args.tenant))
    if args.http:
        serve_http(server, args.port)
    else:
        anyio.run(serve_stdio, server)
    return 0


def register(subparsers: Subparsers) -> None:
    from sagactl.agent_server import DEFAULT_HTTP_PORT, HTTP_PATH

    mcp = subparsers.add_parser(
        "mcp",
        help="serve the agent tools (propose, get, start a replacement) over MCP",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    mcp.set_defaults(handler=guarded(command_mcp))
