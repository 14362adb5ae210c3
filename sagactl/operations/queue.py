"""The escalation queue on a target: its depth, and removing one case's messages.

The queue notifies; it is not the worklist (sagactl.views.escalations). Only `remove_case_messages`
receives from it: a receive counts toward a message's dead-letter redrive (maxReceiveCount 5), so
nothing else does, not even to peek.
"""

from __future__ import annotations

import json
from typing import Any

from sagactl.errors import SagactlError
from sagactl.target import Target
from sagactl.views.escalations import QueueCleanup

# While resolve reads the queue, the messages it leaves alone stay hidden from other readers
# for at most this long; it makes them visible again as soon as it has read the queue once.
SCAN_VISIBILITY_SECONDS = 120
SCAN_WAIT_SECONDS = 1  # long polling: an empty answer means no message is visible
_SQS_BATCH = 10


def escalation_queue_depth(target: Target) -> int | None:
    attributes = escalation_queue_attributes(target)
    return attributes[0] if attributes else None


def escalation_queue_attributes(target: Target) -> tuple[int, int] | None:
    """(messages waiting, how long the queue keeps one in seconds); None without a queue
    output. GetQueueAttributes only: nothing is received."""
    queue = target.optional_output("EscalationQueueUrl")
    if not queue:
        return None
    attributes = target.client("sqs").get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "MessageRetentionPeriod"]
    )["Attributes"]
    return (
        int(attributes.get("ApproximateNumberOfMessages", 0)),
        int(attributes.get("MessageRetentionPeriod", 4 * 86400)),  # SQS's default: 4 days
    )


def remove_case_messages(
    target: Target, case_id: str, *, execution_arn: str | None = None
) -> QueueCleanup | None:
    """Delete this case's messages from the escalation queue; leave every other one as it was,
    visible again at once. None when the stack has no queue output.

    SQS cannot be filtered or peeked: a message is read only by receiving it, and every receive
    adds one to its ApproximateReceiveCount. So this reads each message on the queue once (the
    ones it keeps stay hidden from other readers until it has read the queue through, at most
    SCAN_VISIBILITY_SECONDS), deletes those that name the case (`case_id`, or the execution that
    owns it), and makes the others visible again immediately. The cost: each resolve counts one
    receive on every other message; a message nobody consumes that sits through five resolves
    moves to the dead-letter queue at its next receive (maxReceiveCount 5). `escalations show`
    never receives. A message sent while this runs, or after (a sweep that read the index just
    before the decision), may stay: it names a case the worklist shows as resolved.
    """
    url = target.optional_output("EscalationQueueUrl")
    if not url:
        return None
    sqs = target.client("sqs")
    others: dict[str, str] = {}  # message id -> receipt handle, to make visible again
    removed: set[str] = set()
    try:
        while True:
            batch = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=_SQS_BATCH,
                VisibilityTimeout=SCAN_VISIBILITY_SECONDS,
                WaitTimeSeconds=SCAN_WAIT_SECONDS,
            ).get("Messages", [])
            if not batch:
                break
            mine = []
            for message in batch:
                if _names_case(message.get("Body", ""), case_id, execution_arn):
                    mine.append(message)
                else:
                    others[message["MessageId"]] = message["ReceiptHandle"]
            if mine:
                _delete(sqs, url, mine)
                removed.update(message["MessageId"] for message in mine)
    finally:
        _make_visible(sqs, url, others)
    return QueueCleanup(removed=len(removed), released=len(others))


def _names_case(body: str, case_id: str, execution_arn: str | None) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict):
        return False
    if message.get("case_id") == case_id:
        return True
    executions = {message.get("execution"), message.get("execution_arn")}
    return execution_arn is not None and execution_arn in executions


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    response = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]}
            for n, message in enumerate(messages)
        ],
    )
    failed = response.get("Failed") or []
    if failed:
        reasons = ", ".join(f"{entry.get('Code')}: {entry.get('Message')}" for entry in failed)
        raise SagactlError(f"{len(failed)} message(s) were not deleted ({reasons})")


def _make_visible(sqs: Any, url: str, handles: dict[str, str]) -> None:
    entries = [
        {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": 0}
        for n, handle in enumerate(handles.values())
    ]
    for start in range(0, len(entries), _SQS_BATCH):
        sqs.change_message_visibility_batch(
            QueueUrl=url, Entries=entries[start : start + _SQS_BATCH]
        )
