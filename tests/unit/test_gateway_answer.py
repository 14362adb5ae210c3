"""What an agent reads of AgentToolsFunction's answer, whichever way AgentCore Gateway maps a
Lambda target's return value (docs/design.md §10; no AWS document says which):

- passed through: the return value is the tools/call result (MCP's CallToolResult: `isError`,
  `content`, `structuredContent`);
- wrapped: the Gateway serializes the returned JSON as the text of one content item, `isError`
  false (its own encoder: it may escape non-ASCII, Python's does by default).

Under both, an error's code and sentence are in the text the agent sees, literally, and a
success's result is there as JSON.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import CallToolResult, TextContent

from saga.agent.gateway import gateway_answer, plain_text
from saga.agent.tools import ErrorCode, ToolError, error_result
from saga.identity import agent_case_id
from tests.unit.test_agent_gateway_handler import gateway, gateway_context, handler
from tests.unit.test_agent_tools import PROPOSAL

__all__ = ["gateway"]


def passed_through(answer: dict[str, Any]) -> CallToolResult:
    return CallToolResult.model_validate(answer)


def wrapped(answer: dict[str, Any], *, ensure_ascii: bool) -> CallToolResult:
    text = json.dumps(answer, ensure_ascii=ensure_ascii)
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=False)


def seen(result: CallToolResult) -> str:
    """The text an agent sees: every text content item."""
    return "\n".join(item.text for item in result.content if isinstance(item, TextContent))


@given(code=st.sampled_from(list(ErrorCode)), message=st.text(min_size=1, max_size=200))
def test_an_errors_code_and_sentence_read_the_same_in_both_mappings(
    code: ErrorCode, message: str
) -> None:
    answer = gateway_answer(error_result(ToolError(code, message)))
    sentence = f"{code.value}: {plain_text(message)}"

    direct = passed_through(answer)
    assert direct.is_error is True
    assert seen(direct) == sentence
    assert direct.structured_content == {
        "error": {"code": code.value, "message": plain_text(message)}
    }

    as_text = seen(wrapped(answer, ensure_ascii=False))
    assert as_text.startswith('{"isError": true, "content": [')
    assert sentence in as_text
    if sentence.isascii():
        assert sentence in seen(wrapped(answer, ensure_ascii=True))
    # Only what JSON escapes was changed: quotes, backslashes, control characters.
    for before, after in zip(message, plain_text(message), strict=True):
        assert (
            before == after
            or (before, after) in {('"', "'"), ("\\", "/")}
            or (unicodedata.category(before) == "Cc" and after == " ")
        )


def test_quotes_backslashes_and_line_breaks_become_plain_text() -> None:
    assert plain_text('request_id "a\\b"\nwas used') == "request_id 'a/b' was used"
    assert plain_text("caf\u00e9 'ok'") == "caf\u00e9 'ok'"


def test_a_refusal_through_the_handler_reads_the_same_in_both_mappings(gateway: Any) -> None:
    answer = handler(
        {"case_id": "agt-nope"}, gateway_context("acme-replacements", "get_replacement")
    )

    direct = passed_through(answer)
    assert direct.is_error is True
    assert seen(direct).startswith("NOT_FOUND: there is no replacement case agt-nope for this")
    as_text = seen(wrapped(answer, ensure_ascii=True))
    assert seen(direct) in as_text
    assert json.loads(as_text)["isError"] is True


def test_a_result_through_the_handler_reads_the_same_in_both_mappings(gateway: Any) -> None:
    answer = handler(dict(PROPOSAL), gateway_context("acme-replacements", "propose_replacement"))

    direct = passed_through(answer)
    assert direct.is_error is False
    proposed = json.loads(seen(direct))
    assert proposed["case_id"] == agent_case_id("acme", PROPOSAL["request_id"])
    assert proposed == direct.structured_content
    as_json = json.loads(seen(wrapped(answer, ensure_ascii=True)))
    assert as_json["isError"] is False
    assert json.loads(as_json["content"][0]["text"]) == proposed == as_json["structuredContent"]


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_starts_the_text_an_agent_sees(code: ErrorCode) -> None:
    answer = gateway_answer(error_result(ToolError(code, 'case "x": no')))
    assert seen(passed_through(answer)) == f"{code.value}: case 'x': no"
    assert f"{code.value}: case 'x': no" in seen(wrapped(answer, ensure_ascii=True))
