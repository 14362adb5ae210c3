"""The `pending` retrier outlasts the lease of the attempt it waits for (stacks/config.py).

An ActionPending means another attempt holds the action's lease. If every FULL-jitter wait of
the `pending` retrier ends before that lease does, the last retry meets a live lease again and
the execution fails at the task, although the action was about to be decided. The longest lease
is the function timeout plus the lease margin (saga.ledger.LedgerPolicy.lease_seconds). Step
Functions' FULL jitter draws retry n's wait from uniform(0, min(MaxDelaySeconds, IntervalSeconds
* BackoffRate**n)) (moto's executor draws the same way); the Monte Carlo below does exactly that,
independently of the closed form the config check uses.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from saga.ledger import LedgerPolicy
from stacks.config import (
    LEDGER_MIN_LEASE_SECONDS,
    PENDING_OUTLAST_BOUND,
    ConfigError,
    RetryPolicy,
    SagaConfig,
    full_jitter_total_wait_below,
)

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
SEED = 20_240_601


def _context() -> dict[str, Any]:
    return dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"])


def _policy(interval: int, attempts: int, backoff: float, max_delay: int) -> RetryPolicy:
    return RetryPolicy(
        name="pending",
        error_equals=("ActionPending",),
        interval_seconds=interval,
        max_attempts=attempts,
        backoff_rate=backoff,
        max_delay_seconds=max_delay,
    )


def monte_carlo_total_wait_below(
    policy: RetryPolicy, seconds: float, draws: int, seed: int = SEED
) -> tuple[float, float]:
    """(estimate, standard error) of P(sum of the retries' FULL-jitter waits < seconds)."""
    rng = random.Random(seed)
    caps = [
        min(policy.max_delay_seconds, policy.interval_seconds * policy.backoff_rate**n)
        for n in range(policy.max_attempts)
    ]
    hits = sum(sum(rng.uniform(0, cap) for cap in caps) < seconds for _ in range(draws))
    estimate = hits / draws
    # With few hits, use the rule-of-three-like floor so the band is never zero-width.
    error = math.sqrt(max(estimate, 3 / draws) * (1 - estimate) / draws)
    return estimate, error


def test_the_longest_lease_is_the_ledgers_lease_for_a_whole_function_timeout() -> None:
    config = SagaConfig.from_mapping(_context())
    ledger = LedgerPolicy(lease_margin_seconds=config.ledger.lease_margin_seconds)
    assert LedgerPolicy.min_lease_seconds == LEDGER_MIN_LEASE_SECONDS
    assert config.longest_lease_seconds == ledger.lease_seconds(config.functions.timeout_seconds)
    assert config.longest_lease_seconds == 40  # 30 s function timeout + 10 s margin


def test_cdk_json_pending_retrier_outlasts_a_lease_with_high_probability() -> None:
    """Stated computation: caps 5, 10, 20, 30 x 7 s; P(total wait < 40 s) = 9.1e-5 exactly,
    about 1 in 11,000, under the bound of 1 in 1,000. A seeded Monte Carlo agrees."""
    config = SagaConfig.from_mapping(_context())
    policy, lease = config.pending_policy, config.longest_lease_seconds

    exact = full_jitter_total_wait_below(policy, lease)
    estimate, error = monte_carlo_total_wait_below(policy, lease, draws=200_000)

    assert policy.jitter_caps() == [5, 10, 20, 30, 30, 30, 30, 30, 30, 30]
    assert float(exact) == pytest.approx(9.1006e-05, rel=1e-4)
    assert exact < PENDING_OUTLAST_BOUND
    assert estimate < float(PENDING_OUTLAST_BOUND)
    assert abs(estimate - float(exact)) < 4 * error


def test_the_closed_form_is_exact() -> None:
    # One retry, cap 5: P(U < 2) = 2/5.
    assert full_jitter_total_wait_below(_policy(5, 1, 2.0, 30), 2) == pytest.approx(0.4)
    # Caps 5 and 10: P(U1 + U2 < 7) = integral over u of (7 - u) / 10 / 5 du = 0.45.
    assert full_jitter_total_wait_below(_policy(5, 2, 2.0, 30), 7) == pytest.approx(0.45)
    # Beyond the largest possible total the waits always end before: 1.
    assert full_jitter_total_wait_below(_policy(5, 2, 2.0, 30), 15) == 1
    # No retries at all never outlast anything.
    assert full_jitter_total_wait_below(_policy(5, 0, 2.0, 30), 40) == 1
    # The previous cdk.json policy (6 retries), where the probability is large enough for a
    # Monte Carlo to pin it closely.
    old = _policy(5, 6, 2.0, 30)
    exact = full_jitter_total_wait_below(old, 40)
    estimate, error = monte_carlo_total_wait_below(old, 40, draws=100_000)
    assert float(exact) == pytest.approx(0.08839, rel=1e-3)
    assert abs(estimate - float(exact)) < 4 * error


def test_fractional_caps_give_an_upper_bound() -> None:
    """Caps 5, 7.5, 11.25, 16.875 are counted as 5, 7, 11, 16 s: shorter waits, so the result
    can only overstate the probability of ending inside the lease."""
    policy = _policy(5, 4, 1.5, 30)
    bound = full_jitter_total_wait_below(policy, 20)
    estimate, error = monte_carlo_total_wait_below(policy, 20, draws=100_000)
    assert float(bound) >= estimate - 4 * error
    assert float(bound) == pytest.approx(0.5301, rel=1e-3)


@pytest.mark.parametrize(
    ("edit", "probability"),
    [
        (("retry", "pending", "MaxAttempts", 6), "0.088"),  # the previous policy
        (("retry", "pending", "MaxDelaySeconds", 10), "0.2"),
        (("functions", "timeout_seconds", 50), "0.0035"),  # a 60 s lease, the same retrier
    ],
)
def test_an_edit_that_lets_pending_retries_end_inside_a_lease_is_refused(
    edit: tuple[Any, ...], probability: str
) -> None:
    context = copy.deepcopy(_context())
    *path, key, value = edit
    node = context
    for part in path:
        node = node[part]
    node[key] = value
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(context)
    message = str(refused.value)
    assert message.startswith("context 'retry.pending' retries for too short a time")
    assert f"with probability {probability}, above 0.001" in message
    assert "raise MaxAttempts, IntervalSeconds or MaxDelaySeconds" in message
