"""Drafts as the agent tools wrote and approved them before drafts were keyed by tenant (up to
commit ec32db1), frozen here so that the migration tests meet exactly what that code left in a
deployed stack: the case id `agt-` + the first 32 hex digits of SHA-256(tenant \\n request_id),
one item per case id in the table keyed by `case_id` alone (the stack's `DraftsTable`, now
`LegacyDraftsTableName`), the approval stored on it under that key.

Copied from that version's saga.agent.tools (agent_case_id, propose_replacement) and
saga.agent.drafts (DraftStore.create, DraftStore.approve); only the shape of what they wrote
matters, so the copy keeps every attribute and condition and drops their error handling.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from saga.dynamodb import to_item
from saga.models import approval_digest

CREATED_AT = "2026-11-30T10:02:11Z"


def agent_case_id(tenant_id: str, request_id: str) -> str:
    digest = hashlib.sha256(f"{tenant_id}\n{request_id}".encode()).hexdigest()
    return f"agt-{digest[:32]}"


def propose(client: Any, table: str, tenant_id: str, request: Mapping[str, Any]) -> str:
    """What propose_replacement wrote for `request` (its arguments): the draft's case id."""
    case_id = agent_case_id(tenant_id, request["request_id"])
    parameters = {
        "order": {"order_id": request["order_id"], "customer_id": request["customer_id"]},
        "reserve": {"sku": request["sku"], "quantity": request["quantity"]},
        "refund": {
            "payment_reference": request["payment_reference"],
            "amount_minor": request["amount_minor"],
            "currency": request["currency"],
        },
        "shipment": {"address": dict(request["address"])},
    }
    digest = approval_digest(
        {"case_id": case_id, "tenant_id": tenant_id, **parameters, "approval": {"revision": 1}}
    )
    draft = {
        "case_id": case_id,
        "tenant_id": tenant_id,
        "request_id": request["request_id"],
        "digest": digest,
        "revision": 1,
        "parameters": parameters,
        "created_at": CREATED_AT,
    }
    client.put_item(
        TableName=table,
        Item=to_item(draft),
        ConditionExpression="attribute_not_exists(case_id)",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    return case_id


def approve(
    client: Any, table: str, case_id: str, digest: str, approval: Mapping[str, Any]
) -> None:
    """What `sagactl case approve --case` stored on such a draft."""
    client.update_item(
        TableName=table,
        Key={"case_id": {"S": case_id}},
        UpdateExpression="SET approval = :approval, approved_at = :now",
        ConditionExpression=(
            "digest = :digest AND revision = :revision AND attribute_not_exists(approval)"
        ),
        ExpressionAttributeValues=to_item(
            {
                ":approval": dict(approval),
                ":now": CREATED_AT,
                ":digest": digest,
                ":revision": int(approval["revision"]),
            }
        ),
    )
