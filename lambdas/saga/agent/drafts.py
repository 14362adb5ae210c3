"""The drafts tables: cases an agent proposed, waiting for a person's signed approval
(docs/design.md §10).

One item per draft, keyed by its tenant, then its application-assigned case id
(`agt_<tenant>_<code>`): the tenant leads the key, so an IAM condition on
`dynamodb:LeadingKeys` can scope a principal to one tenant's drafts. Drafts proposed before ids
carried the tenant (`agt-` + 32 hex digits) stay in the table that was keyed by `case_id` alone
(the legacy table), where they are read and approved; nothing is created there any more. The
id says which table holds a draft, so every read is one GetItem.

A draft is written once (`attribute_not_exists(case_id)`, the old item returned on a failed
condition, as the ledger claims); its approval is written once, conditional on the digest the
approver saw. Four eyes (docs/design.md §9): a second approver's signature is added once to the
approval's `co_signatures`, conditional on the same digest, an approval by someone else, and no
co-signature yet: one signature per approver, two at most. The cases table and its outcomes (§8)
are not touched: a draft becomes a case only when it is started. A write the table did not
answer is a TransientError: nothing is decided on it.

An approver's UpdateItem asks nothing back, not even the old item on a failed condition
(`ReturnValuesOnConditionCheckFailure`): no IAM condition key governs that parameter, so under
the approver role's fine-grained conditions (stacks/constructs/people.py, approval_only) it
would be a read no policy confines. A failed condition is answered by a strongly consistent
GetItem, which the role is granted anyway, and whether the write was ours (the SDK's retry of
a write whose answer was lost) is decided from what is written once only: the approval as
signed, the co-signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga.clock import now_iso
from saga.dynamodb import from_item, read_item, to_item
from saga.errors import TransientError
from saga.identity import agent_namespace, is_legacy_agent_case_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# The parts of a case a draft holds besides its identity (the approved parameters, §8).
PARAMETER_KEYS = ("order", "reserve", "refund", "shipment")
DRAFT_REVISION = 1  # a draft is approved as the case's first revision


class DraftConflict(Exception):
    """A conditional write found the draft other than expected; `current` is it as it is."""

    def __init__(self, message: str, current: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.current = current


def draft_case(draft: Mapping[str, Any]) -> dict[str, Any]:
    """The case (docs/design.md §8) a draft stands for: its parameters and, once approved, the
    signed approval; before that, the approval holds only the revision and digest."""
    approval = dict(draft.get("approval") or {})
    approval.setdefault("revision", int(draft["revision"]))
    approval.setdefault("digest", draft["digest"])
    return {
        "case_id": draft["case_id"],
        "tenant_id": draft["tenant_id"],
        **{key: draft["parameters"][key] for key in PARAMETER_KEYS},
        "approval": approval,
    }


class DraftStore:
    """What an agent proposed, one draft per case id: `table_name` keyed (tenant_id, case_id),
    `legacy_table_name` keyed by case_id (drafts proposed before ids carried the tenant)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        legacy_table_name: str,
        clock: saga_clock.Clock = saga_clock.now,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.legacy_table_name = legacy_table_name
        self.clock = clock

    def location(self, case_id: str) -> tuple[str, dict[str, str]] | None:
        """(table, key) where the draft `case_id` is, if it can be a draft at all."""
        if is_legacy_agent_case_id(case_id):
            return self.legacy_table_name, {"case_id": case_id}
        tenant = agent_namespace(case_id)
        if not tenant:
            return None  # not an agent's case id: no draft has it
        return self.table_name, {"tenant_id": tenant, "case_id": case_id}

    def get(self, case_id: str) -> dict[str, Any] | None:
        where = self.location(case_id)
        if where is None:
            return None
        try:
            return read_item(self.client, *where)
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"draft {case_id}: the drafts table did not answer") from exc

    def create(
        self,
        *,
        case_id: str,
        tenant_id: str,
        request_id: str,
        digest: str,
        parameters: Mapping[str, Any],
    ) -> tuple[dict[str, Any], bool]:
        """Write the draft once: (the draft, True), or (the draft already there, False). Only
        under an agent case id of its own tenant (`agt_<tenant>_...`)."""
        if agent_namespace(case_id) != tenant_id:
            raise ValueError(f"{case_id} is not an agent case id of tenant {tenant_id}")
        draft = {
            "case_id": case_id,
            "tenant_id": tenant_id,
            "request_id": request_id,
            "digest": digest,
            "revision": DRAFT_REVISION,
            "parameters": {key: parameters[key] for key in PARAMETER_KEYS},
            "created_at": now_iso(self.clock),
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item(draft),
                ConditionExpression="attribute_not_exists(case_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise TransientError(f"draft {case_id}: the drafts table did not answer") from exc
            old: Any = exc.response.get("Item")
            # The SDK's own retry of our write whose answer was lost meets our own item.
            return (from_item(old) if old else draft), False
        except BotoCoreError as exc:
            raise TransientError(f"draft {case_id}: the drafts table did not answer") from exc
        return draft, True

    def approve(self, case_id: str, *, digest: str, approval: Mapping[str, Any]) -> None:
        """Store the signed approval once, only on the draft the approver saw (same digest).
        DraftConflict when the draft is gone, changed, or approved already."""
        self._update(
            case_id,
            update="SET approval = :approval, approved_at = :now",
            condition=(
                "digest = :digest AND revision = :revision AND attribute_not_exists(approval)"
            ),
            values={
                ":approval": dict(approval),
                ":digest": digest,
                ":revision": int(approval["revision"]),
            },
            # The approval as it was signed; the co-signatures a second approver adds to it
            # since are not part of it.
            ours=lambda current: _without_co_signatures(current.get("approval")) == dict(approval),
        )

    def co_sign(self, case_id: str, *, digest: str, signature: Mapping[str, Any]) -> None:
        """Add a second approver's signature (four eyes) once, only on the draft the approver
        saw (same digest), approved by someone else and not co-signed yet. DraftConflict
        otherwise."""
        self._update(
            case_id,
            update="SET approval.co_signatures = :signatures, co_signed_at = :now",
            condition=(
                "digest = :digest AND attribute_exists(approval) AND approval.approved_by <> :me "
                "AND attribute_not_exists(approval.co_signatures)"
            ),
            values={
                ":signatures": [dict(signature)],
                ":digest": digest,
                ":me": signature["approved_by"],
            },
            ours=lambda current: (
                (current.get("approval") or {}).get("co_signatures") == [dict(signature)]
            ),
        )

    def _update(
        self,
        case_id: str,
        *,
        update: str,
        condition: str,
        values: Mapping[str, Any],
        ours: Callable[[Mapping[str, Any]], bool],
    ) -> None:
        """One conditional write of the draft's approval; `ours` tells our own write, repeated
        by the SDK after a lost answer, from another's, on the draft as a strongly consistent
        read finds it after the condition failed (module docstring)."""
        where = self.location(case_id)
        if where is None:
            raise DraftConflict(f"draft {case_id}: approval not stored: no draft has this id", None)
        table, key = where
        try:
            self.client.update_item(
                TableName=table,
                Key={name: {"S": value} for name, value in key.items()},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=to_item({**values, ":now": now_iso(self.clock)}),
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise TransientError(f"draft {case_id}: the approval was not stored") from exc
        except BotoCoreError as exc:
            raise TransientError(f"draft {case_id}: the approval was not stored") from exc
        else:
            return
        current = self.get(case_id)  # GetItem, ConsistentRead
        if current is not None and ours(current):
            return
        raise DraftConflict(f"draft {case_id}: approval not stored: {_why_not(current)}", current)


def _without_co_signatures(approval: Any) -> dict[str, Any] | None:
    """An approval as its approver signed it: without the co-signatures added to it since."""
    if not isinstance(approval, Mapping):
        return None
    return {name: value for name, value in approval.items() if name != "co_signatures"}


def _why_not(current: Mapping[str, Any] | None) -> str:
    """Why a conditional write of a draft's approval found it other than expected."""
    if current is None:
        return "there is no such draft"
    approval = current.get("approval")
    if not approval:
        return "it changed since it was read"
    signers = [approval.get("approved_by")] + [
        co.get("approved_by") for co in approval.get("co_signatures") or ()
    ]
    return f"it was approved already by {' and '.join(str(s) for s in signers)}"
