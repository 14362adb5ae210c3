"""Many deliveries of the same action at once: exactly one effect.

Each round starts >= 32 threads behind a barrier, all delivering the same action with their own
attempt ids through one shared client, against moto with every DynamoDB request made atomic
(as DynamoDB makes each single-item write atomic). Rounds: 20 by default; the slow campaign
(`make test-long`, SAGA_LONG_TESTS=1) runs 200 more.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from saga.errors import ActionPending
from saga.ledger import ActionLedger, ActionOutcome, Attempt, EffectResult
from tests.integration.ledger_harness import CountingDownstream, refund_request

THREADS = 32
ROUNDS = 20
LONG_ROUNDS = 200
long_campaign = pytest.mark.skipif(
    os.environ.get("SAGA_LONG_TESTS") != "1", reason="long campaign: SAGA_LONG_TESTS=1"
)


def run_round(ledger: ActionLedger, downstream: CountingDownstream, round_no: int) -> list[Any]:
    request = refund_request(case_id=f"case-{round_no:04d}")
    ref = request.action_id
    barrier = threading.Barrier(THREADS)
    refused = threading.Event()

    def effect() -> EffectResult:
        # Hold the effect until another delivery has been refused, so every round really has
        # deliveries racing a live lease (bounded wait; the assertions below count the result).
        refused.wait(timeout=10)
        return downstream.refund(ref, 2000)

    def deliver(thread_no: int) -> Any:
        barrier.wait()
        try:
            return ledger.execute(
                request,
                Attempt(f"exec-{round_no}#IssueRefund#0#{thread_no}", 30),
                effect=effect,
                reconcile=downstream.lookup(ref),
            )
        except ActionPending as pending:
            refused.set()
            return pending

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        return list(pool.map(deliver, range(THREADS)))


@pytest.mark.usefixtures("atomic_requests")
def test_concurrent_deliveries_of_one_action_make_exactly_one_effect(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    check_rounds(ledger, downstream, ROUNDS)


@pytest.mark.slow
@pytest.mark.timeout(900)
@long_campaign
@pytest.mark.usefixtures("atomic_requests")
def test_concurrent_deliveries_long_campaign(
    ledger: ActionLedger, downstream: CountingDownstream
) -> None:
    check_rounds(ledger, downstream, LONG_ROUNDS)


def check_rounds(ledger: ActionLedger, downstream: CountingDownstream, rounds: int) -> None:
    pending_total = 0
    for round_no in range(rounds):
        results = run_round(ledger, downstream, round_no)
        ref = refund_request(case_id=f"case-{round_no:04d}").action_id

        effects = downstream.effects_for(ref)
        assert len(effects) == 1, f"round {round_no}: {len(effects)} effects"
        outcomes = [r for r in results if isinstance(r, ActionOutcome)]
        pending = [r for r in results if isinstance(r, ActionPending)]
        assert len(outcomes) + len(pending) == THREADS  # nothing else was raised
        fresh = [o for o in outcomes if not o.replayed]
        assert len(fresh) == 1, f"round {round_no}: {len(fresh)} deliveries ran the effect"
        assert all(o.result == effects[0] for o in outcomes)
        assert all(o.attempts == 1 for o in outcomes)  # nobody took over a live lease
        assert pending, f"round {round_no}: no delivery met the live lease"
        pending_total += len(pending)
    assert len(downstream.effects) == rounds
    assert pending_total >= rounds
