"""An agent as the tests drive it: the `mcp` package's own client (ClientSession over stdio)
talking to a real `sagactl mcp --tenant T` process against the local AWS."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from local_aws.environment import LocalAws

Session = Callable[[ClientSession], Awaitable[Any]]


def server(local: LocalAws, outputs: Path, tenant: str = "acme") -> StdioServerParameters:
    env = {**local.environment, "SAGA_LOCAL_OUTPUTS": str(outputs), "PATH": os.environ["PATH"]}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "sagactl.cli", "mcp", "--tenant", tenant], env=env
    )


def with_session(params: StdioServerParameters, body: Session) -> Any:
    """One agent invocation: a fresh server process and client session, `body` run in it."""

    async def main() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(main)


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's structured result, or {"error": {"code", "message"}} for a tool error (a
    FAILED status has an `error` too: the execution's, a string)."""
    result = await session.call_tool(tool, arguments)
    structured = result.structured_content
    assert isinstance(structured, dict), result
    assert result.is_error == isinstance(structured.get("error"), dict), result
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return structured


async def follow(session: ClientSession, case_id: str) -> list[dict[str, Any]]:
    """get_replacement every 0.1 s until the case is COMPLETED, ESCALATED or FAILED (at most 600
    times): every answer, in order."""
    seen = []
    for _ in range(600):
        status = await call(session, "get_replacement", case_id=case_id)
        seen.append(status)
        if status.get("status") in ("COMPLETED", "ESCALATED", "FAILED", None):
            break
        await anyio.sleep(0.1)
    return seen


def count(local: LocalAws, output_key: str, case_id: str) -> int:
    """Items of the table `output_key` names whose `case_id` is `case_id`."""
    items = local.client("dynamodb").scan(
        TableName=local.outputs[output_key],
        FilterExpression="case_id = :c",
        ExpressionAttributeValues={":c": {"S": case_id}},
        ConsistentRead=True,
    )["Items"]
    return len(items)
