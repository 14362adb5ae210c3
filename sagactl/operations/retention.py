"""The one-off backfill of the open-record retention rule (docs/design.md §3.7).

Records written before the rule carried `expires_at` whatever their status, so an action that
was open when its retention ended could be deleted by TTL while still open (and the sweeper, the
worklist and the `StuckActions` metric lost it). The rule is kept by every write since; this
removes `expires_at` from the records that are open today. The ledger's sparse `open-actions`
index holds exactly those (`open_status` is set only while IN_PROGRESS or UNKNOWN and not
settled), so the backfill reads that index, not the table, and writes only records that still
carry a retention, each with one UpdateItem conditional on the record still being open and
unsettled: a record that closed or was settled meanwhile is left as it is, and running it again
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from saga.dynamodb import is_condition_failure
from saga.ledger import OPEN_STATUSES
from saga.tools.sweeper import OPEN_ACTIONS_INDEX
from sagactl.target import Target


@dataclass
class BackfillReport:
    open_records: int = 0  # every open record the index listed
    kept: list[str] = field(default_factory=list)  # retention removed (or would be: dry run)
    changed_meanwhile: list[str] = field(default_factory=list)  # closed or settled since read

    def to_json(self) -> dict[str, Any]:
        return {
            "open_records": self.open_records,
            "retention_removed": self.kept,
            "changed_meanwhile": self.changed_meanwhile,
        }


def keep_open_records(target: Target, *, dry_run: bool = False) -> BackfillReport:
    """Remove `expires_at` from every open record that still carries one."""
    client = target.client("dynamodb")
    table = target.output("LedgerTableName")
    report = BackfillReport()
    for status in sorted(OPEN_STATUSES):
        pages = client.get_paginator("query").paginate(
            TableName=table,
            IndexName=OPEN_ACTIONS_INDEX,
            KeyConditionExpression="open_status = :status",
            ExpressionAttributeValues={":status": {"S": status.value}},
        )
        for page in pages:
            for item in page.get("Items", []):
                report.open_records += 1
                if "expires_at" not in item:
                    continue
                key = item["action_key"]["S"]
                if dry_run or _remove_retention(client, table, key, status.value):
                    report.kept.append(key)
                else:
                    report.changed_meanwhile.append(key)
    return report


def _remove_retention(client: Any, table: str, key: str, status: str) -> bool:
    try:
        client.update_item(
            TableName=table,
            Key={"action_key": {"S": key}},
            UpdateExpression="REMOVE expires_at",
            ConditionExpression=(
                "open_status = :status AND #status = :status AND attribute_not_exists(resolution)"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":status": {"S": status}},
        )
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise
    return True
