"""The stuck-action sweeper: open ledger actions nobody is finishing (docs/design.md §3, §5).

The ledger sets `open_status` (= the status) only while an action is IN_PROGRESS or UNKNOWN, so
its sparse index `open-actions` (pk `open_status`, sk `lease_expires_at`) holds exactly the open
actions, ordered by when their lease ended (an UNKNOWN record's `lease_expires_at` is the moment
it became UNKNOWN). An action is stuck when that moment lies more than `grace_seconds` in the
past: no live attempt holds it, and the workflow's own retry or reconciliation has had time to
pick it up. A key condition `lease_expires_at < now - grace` reads only those items, and each is
read back from the table (consistently) before it counts: the index may still show an action
that has moved on.

An open record never expires (§3.7), so an action stays stuck until it is settled, which may be
weeks. The sweeper keeps no state (it does not write the ledger), so how often it re-sends is a
function of how long the action has been stuck (`resend_due`): the first sweep that finds it
sends a message, then one after 1, 2, 4, ... sweep intervals, the gap doubling up to a day; a
person who has not acted in a day hears of it once a day, and two weeks of a stuck action are
about 22 messages, not 4,000. Every message carries a stable `escalation_id` (the action key
and the lease end it was stuck since) so the consumer can recognise a repeat. What a sweep
*finds* (the StuckActions metric, `sagactl stuck`) is every stuck action, every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from saga import clock as saga_clock
from saga.dynamodb import from_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

OPEN_ACTIONS_INDEX = "open-actions"
OPEN_STATUSES = ("IN_PROGRESS", "UNKNOWN")
# cdk.json's `monitoring.stuck_grace_seconds` (pinned equal by tests/infra/test_config.py).
DEFAULT_GRACE_SECONDS = 300
# cdk.json's `monitoring.sweep_every_minutes`, in seconds (the stack gives the deployed value).
DEFAULT_SWEEP_EVERY_SECONDS = 300
MAX_RESEND_GAP_SECONDS = 86400
ESCALATION_KIND = "STUCK_ACTION"


def resend_due(stuck_for: float, *, every: float, max_gap: float = MAX_RESEND_GAP_SECONDS) -> bool:
    """Whether the sweep that finds an action stuck for `stuck_for` seconds (past its grace)
    reports it: when a report time lies within the last sweep interval. Report times are 0,
    then each after a gap that starts at one interval and doubles, up to `max_gap`: 0, 1, 3, 7,
    15, ... intervals. Sweeps `every` seconds apart see each report time once."""
    if stuck_for < 0:
        return False
    reported, gap = 0.0, every
    while gap < max_gap and reported + gap <= stuck_for:
        reported, gap = reported + gap, min(2 * gap, max_gap)
    if gap >= max_gap and reported + gap <= stuck_for:
        reported += ((stuck_for - reported) // gap) * gap
    return stuck_for - reported < every


@dataclass(frozen=True)
class StuckAction:
    """An open action whose lease ran out longer ago than the grace allows."""

    action_key: str
    status: str
    lease_expires_at: float
    stuck_seconds: float
    attempts: int
    owner: str | None
    case_id: str | None
    execution_arn: str | None
    business_ref: str | None
    compensates: str | None

    @property
    def escalation_id(self) -> str:
        return f"{self.action_key}@{self.lease_expires_at:.3f}"

    def escalation_message(self) -> dict[str, Any]:
        return {
            "kind": ESCALATION_KIND,
            "escalation_id": self.escalation_id,
            "decision_needed": (
                "The action may or may not have taken effect and no attempt is finishing it: "
                "reconcile it with its downstream by business reference, then resume, redrive "
                "or compensate the case."
            ),
            **asdict(self),
        }

    @classmethod
    def from_item(cls, item: dict[str, Any], now: float) -> StuckAction:
        values = from_item(item)
        lease = float(values.get("lease_expires_at", 0))
        return cls(
            action_key=str(values["action_key"]),
            status=str(values.get("status", values.get("open_status", ""))),
            lease_expires_at=lease,
            stuck_seconds=round(max(0.0, now - lease), 3),
            attempts=int(values.get("attempts", 0)),
            owner=_optional(values.get("owner")),
            case_id=_optional(values.get("case_id")),
            execution_arn=_optional(values.get("execution_arn")),
            business_ref=_optional(values.get("business_ref")),
            compensates=_optional(values.get("compensates")),
        )


@dataclass(frozen=True)
class SweepReport:
    """What one sweep found (every stuck action) and which it escalated (those due)."""

    stuck: tuple[StuckAction, ...]
    escalated: int
    escalated_keys: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        by_status = {s: sum(1 for a in self.stuck if a.status == s) for s in OPEN_STATUSES}
        return {
            "stuck": len(self.stuck),
            "escalated": self.escalated,
            "by_status": by_status,
            "action_keys": [a.action_key for a in self.stuck],
            "escalated_keys": list(self.escalated_keys),
        }


class StuckActionSweeper:
    """Find stuck actions on the ledger's open-actions index and escalate each one."""

    def __init__(
        self,
        *,
        dynamodb: DynamoDBClient,
        sqs: SQSClient,
        ledger_table: str,
        escalation_queue_url: str,
        grace_seconds: int = DEFAULT_GRACE_SECONDS,
        sweep_every_seconds: int = DEFAULT_SWEEP_EVERY_SECONDS,
        clock: Callable[[], float] = saga_clock.now,
        index_name: str = OPEN_ACTIONS_INDEX,
        page_size: int | None = None,
    ) -> None:
        if grace_seconds < 0:
            raise ValueError(f"grace_seconds must be >= 0, got {grace_seconds}")
        if sweep_every_seconds <= 0:
            raise ValueError(f"sweep_every_seconds must be > 0, got {sweep_every_seconds}")
        self._every = sweep_every_seconds
        self._dynamodb = dynamodb
        self._sqs = sqs
        self._table = ledger_table
        self._queue_url = escalation_queue_url
        self._grace = grace_seconds
        self._clock = clock
        self._index = index_name
        self._page_size = page_size

    def find_stuck(self) -> list[StuckAction]:
        now = self._clock()
        stuck = [
            StuckAction.from_item(item, now)
            for status in OPEN_STATUSES
            for item in self._open_items(status, stuck_before=now - self._grace)
        ]
        return sorted(stuck, key=lambda a: (a.lease_expires_at, a.action_key))

    def sweep(self) -> SweepReport:
        """Find every stuck action; send a message for each one whose re-send is due."""
        stuck = self.find_stuck()
        due = [
            action
            for action in stuck
            if resend_due(max(0.0, action.stuck_seconds - self._grace), every=self._every)
        ]
        for action in due:
            self._sqs.send_message(
                QueueUrl=self._queue_url,
                MessageBody=json.dumps(action.escalation_message(), sort_keys=True),
            )
        return SweepReport(
            stuck=tuple(stuck),
            escalated=len(due),
            escalated_keys=tuple(action.action_key for action in due),
        )

    def _open_items(self, status: str, *, stuck_before: float) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": self._index,
            "KeyConditionExpression": "open_status = :status AND lease_expires_at < :before",
            "ExpressionAttributeValues": {
                ":status": {"S": status},
                ":before": {"N": repr(round(stuck_before, 3))},
            },
        }
        if self._page_size is not None:
            request["Limit"] = self._page_size
        while True:
            page = self._dynamodb.query(**request)
            for item in page.get("Items", []):
                current = self._still_stuck(item, status, stuck_before=stuck_before)
                if current is not None:
                    yield current
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _still_stuck(
        self, indexed: dict[str, Any], status: str, *, stuck_before: float
    ) -> dict[str, Any] | None:
        """The record as the table holds it now, if it is still open in `status` past its
        lease. A global secondary index is eventually consistent (and takes no consistent
        read): its copy may show an action that has since completed, been settled or been
        claimed by a new attempt. One consistent GetItem per candidate, and stuck actions are
        few."""
        key = {"action_key": indexed["action_key"]}
        item = self._dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        current = item.get("Item")
        if current is None or current.get("open_status", {}).get("S") != status:
            return None
        lease = float(current.get("lease_expires_at", {}).get("N", "inf"))
        return current if lease < stuck_before else None


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)
