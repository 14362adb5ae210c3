"""DynamoDB request counts per ledger path, measured against moto in-process.

    python -m saga_bench.ledger

Counts come from botocore `before-call` event hooks on the ledger's client (one event per API
call the ledger makes), so they are exact and independent of timing. The ledger table is the
synthesized stack's (local_aws.tables), as in the tests. Nothing reaches AWS: the run sets
fake credentials and uses moto's in-process mock.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from local_aws.tables import StackTables
from saga_bench.metering import count_dynamodb_requests

LEDGER_TABLE = "bench-ledger"
RESERVATIONS_TABLE = "bench-reservations"


class _Crash(BaseException):
    """The worker died during its effect: no ledger code runs after this (a Lambda timeout)."""


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


def synthesized_tables() -> StackTables:
    """The tables of the CDK app, synthesized now."""
    from local_aws.environment import StackSource

    return StackTables.from_template(StackSource.synthesized().template)


def measure_paths(tables: StackTables) -> list[tuple[str, Counter[str]]]:
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
        import boto3

        client = dynamodb_client()  # the tools' client; the tables need botocore's whole model
        tables.create(
            boto3.client("dynamodb"),
            {"LedgerTableName": LEDGER_TABLE, "ReservationsTableName": RESERVATIONS_TABLE},
        )
        now = [1_700_000_000.0]
        ledger = ActionLedger(
            LEDGER_TABLE,
            client,
            LedgerPolicy(),
            clock=lambda: now[0],
            observer=_SilentObserver(),
        )

        def request(action_id: str) -> ActionRequest:
            return ActionRequest("acme", "refund", action_id, "sha256:bench", "case-bench")

        def effect() -> EffectResult:
            return EffectResult({"refund_id": "rf-1"}, "rf-1")

        def crash() -> EffectResult:
            raise _Crash

        def run(label: str, call: Callable[[], object]) -> None:
            with count_dynamodb_requests(client) as measured, suppress(ActionPending):
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
        with suppress(_Crash):  # claimed, then the worker died: its lease is live
            ledger.execute(held, Attempt("crashed", 10), effect=crash, reconcile=Absent)
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
            item = {"reservation_id": {"S": action_id}}
            return [{"Put": {"TableName": RESERVATIONS_TABLE, "Item": item}}]

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
    rows = measure_paths(synthesized_tables())
    width = max(len(label) for label, _ in rows)
    print(f"{'ledger path':<{width}}  requests  calls")
    for label, counts in rows:
        calls = ", ".join(f"{name} x{count}" for name, count in sorted(counts.items()))
        print(f"{label:<{width}}  {sum(counts.values()):>8}  {calls}")


if __name__ == "__main__":
    main()
