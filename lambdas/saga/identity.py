"""Action identity (docs/design.md §2): action ids, action keys, request digests, execution names.

An action id comes from the case's own identity (`<case_id>.<operation>`), never from a model's
tool-call id, a Lambda request id, an attempt, a timestamp or a hash of the arguments: two
separately approved 20 USD refunds on two cases are two actions. A compensation's action id is
the id of the action it compensates, under its own operation, so its key is tied to it. The
request digest covers the step's consequential parameters plus the approved revision, so the
same key with other parameters is a KeyConflict in the ledger.

Everything here is derived from the case; nothing is stored elsewhere (the CLI derives the same
keys from a case id and its tenant). An agent's case id is derived from its tenant and request
(docs/design.md §10): `agt_<tenant>_<code>`, so that an id tells whose agent case it is.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saga.models import Case


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


# --- the actions of a case -----------------------------------------------------------------------
@dataclass(frozen=True)
class ActionRequest:
    """One action as the ledger records it: its identity, its request digest, its traces."""

    tenant_id: str
    operation: str  # Operation value
    action_id: str
    digest: str  # request_digest(...)
    case_id: str
    execution_arn: str | None = None
    compensates: str | None = None  # action key of the compensated action
    business_ref: str | None = None  # defaults to action_id

    @property
    def key(self) -> str:
        return action_key(self.tenant_id, self.operation, self.action_id)

    @property
    def reference(self) -> str:
        """What the downstream knows the action by (lookups after an uncertain delivery)."""
        return self.business_ref or self.action_id


def case_action_ids(case_id: str) -> dict[Operation, str]:
    """Every action id of a case; the release's is the reserve action's (it compensates it)."""
    ids = {
        op: action_id_for(case_id, op)
        for op in (Operation.RESERVE, Operation.REFUND, Operation.SHIP)
    }
    ids[Operation.RELEASE] = compensation_action_id(ids[Operation.RESERVE])
    return ids


def case_action_keys(tenant_id: str, case_id: str) -> dict[str, str]:
    """`{operation: action key}` of a case's actions."""
    return {
        operation.value: action_key(tenant_id, operation, action_id)
        for operation, action_id in case_action_ids(case_id).items()
    }


def reservation_id(case: Case) -> str:
    """The reserve action's key, which is also the reservation item's id."""
    return case_action_keys(case.tenant_id, case.case_id)[Operation.RESERVE.value]


def step_parameters(case: Case, operation: Operation) -> dict[str, Any]:
    """The consequential parameters of one action: what the digest and the approval cover."""
    if operation is Operation.RESERVE:
        return {"sku": case.reserve.sku, "quantity": case.reserve.quantity}
    if operation is Operation.REFUND:
        return {
            "order_id": case.order.order_id,
            "payment_reference": case.refund.payment_reference,
            "amount_minor": case.refund.amount_minor,
            "currency": case.refund.currency,
        }
    if operation is Operation.SHIP:
        return {
            "order_id": case.order.order_id,
            "address": case.shipment.address.model_dump(mode="json"),
            "sku": case.reserve.sku,
            "quantity": case.reserve.quantity,
        }
    return {
        "reservation_id": reservation_id(case),
        "sku": case.reserve.sku,
        "quantity": case.reserve.quantity,
    }


def action_request(
    case: Case, operation: Operation, *, execution_arn: str | None = None
) -> ActionRequest:
    """The ledger request of one action of the case."""
    return ActionRequest(
        tenant_id=case.tenant_id,
        operation=operation.value,
        action_id=case_action_ids(case.case_id)[operation],
        digest=request_digest(step_parameters(case, operation), case.approval.revision),
        case_id=case.case_id,
        execution_arn=execution_arn,
        compensates=reservation_id(case) if operation is Operation.RELEASE else None,
    )


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


# --- agent case ids (docs/design.md §10) --------------------------------------------------------
AGENT_CASE_PREFIX = "agt_"
# No tenant id contains `_` (saga.models.TENANT_ID_PATTERN): the tenant is exactly what lies
# between the prefix and the next `_`, so `agt_acme_...` and `agt_acme-eu_...` never meet.
AGENT_ID_DELIMITER = "_"
# 12 base32 characters (60 bits): `agt_` + a 63-character tenant + `_` + 12 = 80, the limit of
# case ids and execution names. Two requests of one tenant share an id with probability
# below n^2 / 2^61 for n requests, and such a collision is refused (CONFLICT), never merged.
AGENT_CODE_LENGTH = 12
# The ids the agent tools gave before they carried the tenant: `agt-` + 32 hex digits.
LEGACY_AGENT_CASE_PREFIX = "agt-"
LEGACY_AGENT_CODE_LENGTH = 32
_LEGACY_AGENT_CASE_ID = re.compile(rf"agt-[0-9a-f]{{{LEGACY_AGENT_CODE_LENGTH}}}")
# Every case id that begins so is an agent's: ValidateCase starts a new case under one only
# where a draft of the case's tenant holds it (saga.tools.validate, docs/design.md §10).
AGENT_ID_PREFIXES = (AGENT_CASE_PREFIX, LEGACY_AGENT_CASE_PREFIX)


def _request_hash(tenant_id: str, request_id: str) -> bytes:
    return hashlib.sha256(f"{tenant_id}\n{request_id}".encode()).digest()


def agent_case_id(tenant_id: str, request_id: str) -> str:
    """`agt_<tenant>_<code>`: the case id of an agent's request, stable across its retries;
    the code is the first 12 base32 characters (lower case) of SHA-256(tenant \\n request)."""
    code = base64.b32encode(_request_hash(tenant_id, request_id)).decode("ascii").lower()
    return f"{AGENT_CASE_PREFIX}{tenant_id}{AGENT_ID_DELIMITER}{code[:AGENT_CODE_LENGTH]}"


def legacy_agent_case_id(tenant_id: str, request_id: str) -> str:
    """The id the same request got before agent case ids carried the tenant: `agt-` + the first
    32 hex digits of SHA-256(tenant \\n request). Its drafts are read where they were written."""
    return f"agt-{_request_hash(tenant_id, request_id).hex()[:32]}"


def agent_readable_patterns(tenant_id: str) -> tuple[str, ...]:
    """The case ids a tenant's agent may read (docs/design.md §11), as IAM patterns (`*` any run
    of characters, `?` exactly one): its own agent case ids, and the ids from before ids carried
    the tenant (which name none) in their exact length, `agt-` and 32 characters. IAM has no
    character classes, so `?` stands for each hex digit; the other ids of that length under
    `agt-` are no case's: ValidateCase starts none without its draft (AGENT_ID_PREFIXES).
    They are also the names of the drafts' executions, which run as revision 1, named by the
    case id (§2): the tools read no other execution of theirs (a later revision's digest is
    never the draft's, saga.agent.owned)."""
    return (
        f"{AGENT_CASE_PREFIX}{tenant_id}{AGENT_ID_DELIMITER}*",
        LEGACY_AGENT_CASE_PREFIX + "?" * LEGACY_AGENT_CODE_LENGTH,
    )


def in_agent_namespace(case_id: str) -> bool:
    """Whether `case_id` is under an agent's prefix (`agt_`, or `agt-` from before)."""
    return case_id.startswith(AGENT_ID_PREFIXES)


def is_legacy_agent_case_id(case_id: str) -> bool:
    return _LEGACY_AGENT_CASE_ID.fullmatch(case_id) is not None


def agent_namespace(case_id: str) -> str | None:
    """The tenant whose agent case ids `case_id` is among (`agt_<tenant>_...`); None for an id
    outside the namespace, "" for an `agt_` id that names no tenant (nobody may use it)."""
    if not case_id.startswith(AGENT_CASE_PREFIX):
        return None
    tenant, delimiter, code = case_id[len(AGENT_CASE_PREFIX) :].partition(AGENT_ID_DELIMITER)
    return tenant if delimiter and code else ""
