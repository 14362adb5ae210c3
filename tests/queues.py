"""Reading an SQS queue in a test: what was sent, each message once."""

from __future__ import annotations

import json
from typing import Any


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message on the queue at `url`, its body parsed, and deleted: a second drain sees
    only what was sent since."""
    bodies: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in batch:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies
