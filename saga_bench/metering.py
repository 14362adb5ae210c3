"""Counting AWS requests (DynamoDB's, KMS's): what `make bench` reports and the tests assert.

Counts, never timings: each API call botocore makes is counted by operation name, so a count is
exact and independent of the machine.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any


def count_dynamodb_requests(client: Any | None = None) -> AbstractContextManager[Counter[str]]:
    """Counts the DynamoDB API calls made inside the block, by operation (count_requests)."""
    return count_requests("dynamodb", client)


@contextmanager
def count_requests(service: str, client: Any | None = None) -> Iterator[Counter[str]]:
    """Counts the API calls to `service` (its signing name: "dynamodb", "kms") made inside the
    block, by operation: the calls of `client` (its botocore `before-call` events), or without
    one, the calls of the local AWS's Lambda handlers (they build their own clients, in worker
    processes: local_aws.aws_calls)."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def count(operation: str) -> None:
        with lock:
            counts[operation] += 1

    if client is not None:

        def on_call(model: Any, **_: Any) -> None:
            count(model.name)

        event = f"before-call.{client.meta.service_model.service_id.hyphenize()}"
        if client.meta.service_model.signing_name != service:
            raise ValueError(f"{event}: not a {service} client")
        client.meta.events.register(event, on_call)
        try:
            yield counts
        finally:
            client.meta.events.unregister(event, on_call)
        return

    # The handlers' calls, in the local AWS's worker processes or in this one.
    from local_aws.lambda_runtime import recording_aws_calls

    with recording_aws_calls() as calls:
        try:
            yield counts
        finally:
            for call in list(calls):
                if call.service == service:
                    count(call.operation)


@dataclass(frozen=True)
class RequestCounter:
    """One client's DynamoDB requests, measured block by block."""

    client: Any

    def measure(self) -> AbstractContextManager[Counter[str]]:
        """`with counter.measure() as calls:` counts the calls made inside the block only."""
        return count_dynamodb_requests(self.client)
