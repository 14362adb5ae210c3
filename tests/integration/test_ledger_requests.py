"""DynamoDB request counts per ledger path, counted with botocore `before-call` hooks."""

from __future__ import annotations

from typing import Any

from local_aws.tables import StackTables
from saga.ledger import ActionLedger, Attempt
from saga_bench.ledger import measure_paths
from saga_bench.metering import RequestCounter
from tests.integration.ledger_harness import CountingDownstream, refund_request


def test_first_external_effect_costs_claim_and_complete(
    ledger: ActionLedger, downstream: CountingDownstream, request_counter: RequestCounter
) -> None:
    request = refund_request()
    with request_counter.measure() as calls:
        ledger.execute(
            request,
            Attempt("a1", 30),
            effect=downstream.effect(request.action_id),
            reconcile=downstream.lookup(request.action_id),
        )
    assert dict(calls) == {"PutItem": 1, "UpdateItem": 1}
    assert len(downstream.effects) == 1


def test_replay_of_a_completed_action_costs_one_request(
    ledger: ActionLedger, downstream: CountingDownstream, request_counter: RequestCounter
) -> None:
    request = refund_request()
    run: dict[str, Any] = {
        "effect": downstream.effect(request.action_id),
        "reconcile": downstream.lookup(request.action_id),
    }
    ledger.execute(request, Attempt("a1", 30), **run)
    with request_counter.measure() as calls:
        outcome = ledger.execute(request, Attempt("a2", 30), **run)
    assert dict(calls) == {"PutItem": 1}  # the failed claim returns the record (ALL_OLD)
    assert outcome.replayed
    assert len(downstream.effects) == 1


def test_benchmark_reports_the_same_counts(
    aws_credentials: None, stack_tables: StackTables
) -> None:
    rows = {label: dict(counts) for label, counts in measure_paths(stack_tables)}
    assert rows["external effect, first delivery"] == {"PutItem": 1, "UpdateItem": 1}
    assert rows["external effect, replay of COMPLETED"] == {"PutItem": 1}
    assert rows["native effect, first delivery"] == {"TransactWriteItems": 1}
    assert rows["native effect, replay"] == {"TransactWriteItems": 1}
    assert rows["live lease of another attempt (pending)"] == {"PutItem": 1}
    assert rows["expired lease: takeover, reconcile Found, complete"] == {
        "PutItem": 1,
        "UpdateItem": 2,
    }
