"""The agent tools' refusals (docs/design.md §10): a code an agent can branch on and a sentence
a person can read, what to do next included."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"
    CONFLICT = "CONFLICT"
    NOT_APPROVED = "NOT_APPROVED"
    NOT_FOUND = "NOT_FOUND"
    UNAVAILABLE = "UNAVAILABLE"


class ToolError(Exception):
    """A refusal an agent can branch on (`code`) with a sentence for a person (`message`)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}
