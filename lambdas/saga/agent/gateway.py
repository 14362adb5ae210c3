"""The AgentCore Gateway's Lambda-target contract (docs/design.md §10).

A Lambda target is invoked with the tool's arguments as the event (no envelope) and the call's
metadata in the Lambda client context, `context.client_context.custom`:
`bedrockAgentCoreToolName` is `<target name>___<tool name>` (the gateway prefixes the target's
name with three underscores), next to `bedrockAgentCoreGatewayId`, `bedrockAgentCoreTargetId`,
`bedrockAgentCoreMessageVersion`, `bedrockAgentCoreAwsRequestId` and
`bedrockAgentCoreMcpMessageId`. The caller's claims are not passed: the tenant is the one that
trusted configuration maps the target to (AGENT_TARGETS; the stack creates one gateway, with its
own inbound authorizer, and one target per tenant).

What the Gateway makes of the function's return value is not documented (AWS's guide asks only
for "a valid JSON response"): it may pass an MCP CallToolResult through (`isError`, `content`) or
wrap the returned JSON as the text of one content item. `gateway_answer` makes the answer read
the same either way (docs/design.md §10).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from saga.agent.tools import ErrorCode, ToolError

TOOL_NAME_KEY = "bedrockAgentCoreToolName"
TARGET_DELIMITER = "___"


def gateway_call(context: Any) -> tuple[str, str]:
    """(target name, tool name) of a Gateway invocation; INVALID_REQUEST when the client
    context does not name a tool the way the Gateway does."""
    client_context = getattr(context, "client_context", None)
    custom = getattr(client_context, "custom", None)
    qualified = custom.get(TOOL_NAME_KEY) if isinstance(custom, Mapping) else None
    if not isinstance(qualified, str) or TARGET_DELIMITER not in qualified:
        raise ToolError(
            ErrorCode.INVALID_REQUEST,
            "this function serves AgentCore Gateway tool calls: the client context must name "
            f"the tool as {TOOL_NAME_KEY} = '<target>{TARGET_DELIMITER}<tool>'",
        )
    target, _, tool = qualified.partition(TARGET_DELIMITER)
    return target, tool


def tenant_of(target: str, targets: Mapping[str, str]) -> str:
    tenant = targets.get(target)
    if tenant is None:
        # A target this stack did not configure: no tenant to act for, so nothing is done.
        raise ToolError(
            ErrorCode.INVALID_REQUEST, f"gateway target {target!r} is not mapped to a tenant"
        )
    return tenant


def gateway_answer(result: Mapping[str, Any]) -> dict[str, Any]:
    """The function's return value for a CallToolResult (saga.agent.tools.error_result or
    success_result), readable whichever way the Gateway maps it: passed through, an agent reads
    `isError` and the text `CODE: sentence`; wrapped, it reads this object as JSON text, which
    starts with `"isError": true` and holds the same `CODE: sentence` literally, since an
    error's words use no character a JSON encoder escapes (`"` and `\\` become `'` and `/`,
    control characters spaces). A success's text is the result's JSON, unchanged."""
    failed = bool(result.get("isError"))
    content = [
        {**item, "text": plain_text(str(item["text"]))}
        if failed and item.get("type") == "text"
        else dict(item)
        for item in result.get("content", [])
    ]
    answer: dict[str, Any] = {"isError": failed, "content": content}
    structured = result.get("structuredContent")
    if structured is not None:
        if failed and isinstance(structured.get("error"), Mapping):
            error = structured["error"]
            structured = {"error": {**error, "message": plain_text(str(error.get("message")))}}
        answer["structuredContent"] = structured
    return answer


def plain_text(text: str) -> str:
    """The text with no character that JSON escapes (besides non-ASCII letters, which some
    encoders escape as \\uXXXX): quotes and backslashes swapped, control characters blanked."""
    return "".join(
        "'" if c == '"' else "/" if c == "\\" else " " if unicodedata.category(c) == "Cc" else c
        for c in text
    )


def gateway_schema(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """A tool's JSON Schema in the Gateway's inline SchemaDefinition subset (type, description,
    properties, required, items; `$ref`s resolved). The Gateway's inline schema has no
    patterns, bounds or additionalProperties: the function validates the full schema itself."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        resolved = defs[str(schema["$ref"]).rsplit("/", 1)[-1]]
        return gateway_schema(
            {**resolved, **{k: v for k, v in schema.items() if k != "$ref"}}, defs
        )
    out: dict[str, Any] = {"type": schema["type"]}
    if schema.get("description"):
        out["description"] = schema["description"]
    if "properties" in schema:
        out["properties"] = {
            name: gateway_schema(value, defs) for name, value in schema["properties"].items()
        }
    if schema.get("required"):
        out["required"] = list(schema["required"])
    if "items" in schema:
        out["items"] = gateway_schema(schema["items"], defs)
    return out
