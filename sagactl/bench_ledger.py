"""DynamoDB request counts per ledger path, measured against moto in-process.

    python -m sagactl.bench_ledger

Counts come from botocore `before-call` event hooks on the ledger's client (one event per API
call the ledger makes), so they are exact and independent of timing. Nothing reaches AWS: the
run sets fake credentials and uses moto's in-process mock.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

LEDGER_GSI = "open-actions"


def create_ledger_table(client: DynamoDBClient, table_name: str) -> None:
    """The ledger table as docs/architecture.md defines it (key, TTL, PITR, sparse GSI)."""
    client.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "action_key", "AttributeType": "S"},
            {"AttributeName": "open_status", "AttributeType": "S"},
            {"AttributeName": "lease_expires_at", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "action_key", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": LEDGER_GSI,
                "KeySchema": [
                    {"AttributeName": "open_status", "KeyType": "HASH"},
                    {"AttributeName": "lease_expires_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )
    client.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )


@dataclass
class RequestCounter:
    """Counts DynamoDB API calls by operation name via botocore `before-call` events."""

    counts: Counter[str] = field(default_factory=Counter)

    def attach(self, client: Any) -> RequestCounter:
        client.meta.events.register("before-call.dynamodb", self._on_call)
        return self

    def _on_call(self, model: Any, **_: Any) -> None:
        self.counts[model.name] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        self.counts.clear()

    @contextmanager
    def measure(self) -> Iterator[Counter[str]]:
        """Counts of the calls made inside the block only."""
        self.reset()
        measured: Counter[str] = Counter()
        try:
            yield measured
        finally:
            measured.update(self.counts)


def _fake_aws_environment() -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )


def measure_paths() -> list[tuple[str, Counter[str]]]:
    """Run every ledger path once and return the DynamoDB calls each one made."""
    _fake_aws_environment()
    from moto import mock_aws

    from saga.aws import dynamodb_client
    from saga.errors import ActionPending
    from saga.ledger import (
        Absent,
        ActionLedger,
        ActionRequest,
        Attempt,
        EffectResult,
        Found,
        LedgerPolicy,
    )

    class _SilentObserver:
        def on_decision(self, name: str, request: ActionRequest, record: object) -> None:
            return None

    rows: list[tuple[str, Counter[str]]] = []
    with mock_aws():
        client = dynamodb_client()
        create_ledger_table(client, "bench-ledger")
        client.create_table(
            TableName="bench-effects",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        now = [1_700_000_000.0]
        ledger = ActionLedger(
            "bench-ledger",
            client,
            LedgerPolicy(),
            clock=lambda: now[0],
            observer=_SilentObserver(),
        )
        counter = RequestCounter().attach(client)

        def request(action_id: str) -> ActionRequest:
            return ActionRequest("acme", "refund", action_id, "sha256:bench", "case-bench")

        def effect() -> EffectResult:
            return EffectResult({"refund_id": "rf-1"}, "rf-1")

        def run(label: str, call: Callable[[], object]) -> None:
            with counter.measure() as measured, suppress(ActionPending):
                call()
            rows.append((label, measured))

        first = request("case-bench.refund")
        run(
            "external effect, first delivery",
            lambda: ledger.execute(first, Attempt("a1", 10), effect=effect, reconcile=Absent),
        )
        run(
            "external effect, replay of COMPLETED",
            lambda: ledger.execute(first, Attempt("a2", 10), effect=effect, reconcile=Absent),
        )
        held = request("case-bench.held")
        ledger.store.claim(held, Attempt("crashed", 10))
        run(
            "live lease of another attempt (pending)",
            lambda: ledger.execute(held, Attempt("b1", 10), effect=effect, reconcile=Absent),
        )
        now[0] += 3600
        run(
            "expired lease: takeover, reconcile Found, complete",
            lambda: ledger.execute(
                held,
                Attempt("b2", 10),
                effect=effect,
                reconcile=lambda: Found({"refund_id": "rf-0"}, "rf-0"),
            ),
        )

        def native_items(action_id: str) -> list[Any]:
            return [{"Put": {"TableName": "bench-effects", "Item": {"pk": {"S": action_id}}}}]

        native = request("case-bench.reserve")
        for label in ("native effect, first delivery", "native effect, replay"):
            run(
                label,
                lambda: ledger.execute_transaction(
                    native,
                    Attempt("n1", 10),
                    effect_items=native_items(native.action_id),
                    result={"reserved": 1},
                    explain_failure=lambda failed: ActionPending(str(failed)),
                ),
            )
        run(
            "reconcile tool on a COMPLETED action",
            lambda: ledger.reconcile(first, Attempt("r1", 10), reconcile=Absent),
        )
    return rows


def main() -> None:
    rows = measure_paths()
    width = max(len(label) for label, _ in rows)
    print(f"{'ledger path':<{width}}  requests  calls")
    for label, counts in rows:
        calls = ", ".join(f"{name} x{count}" for name, count in sorted(counts.items()))
        print(f"{label:<{width}}  {sum(counts.values()):>8}  {calls}")


if __name__ == "__main__":
    main()
