"""Action identity (design.md §2): action ids, action keys and request digests.

An action id comes from the case's own identity (`<case_id>.<operation>`), never from a model's
tool-call id, a Lambda request id, an attempt, a timestamp or a hash of the arguments: two
separately approved 20 USD refunds on two cases are two actions. A compensation's action id is
the id of the action it compensates, under its own operation, so its key is tied to it.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any


class Operation(StrEnum):
    RESERVE = "reserve"
    REFUND = "refund"
    SHIP = "ship"
    RELEASE = "release"


KEY_SEPARATOR = "#"


def action_id_for(case_id: str, operation: Operation) -> str:
    """The action id of a forward step of a case."""
    if operation is Operation.RELEASE:
        raise ValueError("a release's action id is the id of the reservation it compensates")
    return f"{case_id}.{operation.value}"


def compensation_action_id(compensated_action_id: str) -> str:
    """A compensation reuses the compensated action's id; its operation makes the key unique."""
    return compensated_action_id


def action_key(tenant_id: str, operation: Operation | str, action_id: str) -> str:
    """The ledger partition key: `tenant_id#operation#action_id`."""
    parts = (tenant_id, str(operation), action_id)
    for part in parts:
        if not part or KEY_SEPARATOR in part:
            raise ValueError(f"invalid action key component {part!r}")
    return KEY_SEPARATOR.join(parts)


def parse_action_key(key: str) -> tuple[str, str, str]:
    """Split an action key into (tenant_id, operation, action_id)."""
    parts = key.split(KEY_SEPARATOR)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not an action key: {key!r}")
    return parts[0], parts[1], parts[2]


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace; floats are refused (amounts are minor units)."""
    _reject_floats(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def request_digest(parameters: dict[str, Any], revision: int) -> str:
    """SHA-256 of the consequential parameters plus the approved revision."""
    return "sha256:" + sha256_hex({"parameters": parameters, "revision": revision})


def _reject_floats(value: Any) -> None:
    if isinstance(value, float):
        raise TypeError("floats are not allowed in digested data: use integer minor units")
    if isinstance(value, dict):
        for item in value.values():
            _reject_floats(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _reject_floats(item)


# --- execution names ---------------------------------------------------------------------------
MAX_EXECUTION_NAME = 80  # Step Functions' limit
REVISION_MARK = "--r"
# A revision number this long leaves the name only the hash to tell revisions apart.
_MAX_TAIL = MAX_EXECUTION_NAME // 2


def execution_name(case_id: str, revision: int) -> str:
    """The execution name of a case's approved revision: the case id for revision 1, else
    `<case id>--r<revision>`, cut to 80 characters with a hash when longer. Only characters of
    case ids ([A-Za-z0-9_-]) are added: Step Functions asks for those in the names of
    executions it logs to CloudWatch Logs, as the stack's state machine does."""
    if revision <= 1:
        return case_id
    name = f"{case_id}{REVISION_MARK}{revision}"
    if len(name) <= MAX_EXECUTION_NAME:
        return name
    digest = hashlib.sha256(f"{case_id}\n{revision}".encode()).hexdigest()[:12]
    tail = f"-{digest}{REVISION_MARK}{revision}"
    if len(tail) > _MAX_TAIL:
        tail = f"-{digest}"
    return case_id[: MAX_EXECUTION_NAME - len(tail)] + tail
