"""The ledger's policy: the lifetime attempt budget, the retention, how a lease is sized."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LedgerPolicy:
    # Library defaults (tests, sagactl) are cdk.json's `ledger` values, pinned equal by
    # tests/infra/test_config.py; a deployed function gets them from its environment.
    attempt_budget: int = 8  # lifetime deliveries per action (claims + takeovers)
    retention_seconds: int = 30 * 86400
    lease_margin_seconds: int = 10  # lease = attempt.remaining_seconds + margin
    min_lease_seconds: int = 5

    def __post_init__(self) -> None:
        if self.attempt_budget < 1:
            raise ValueError("attempt_budget must be at least 1")
        if self.retention_seconds <= 0:
            raise ValueError("retention_seconds must be positive")
        if self.lease_margin_seconds < 0 or self.min_lease_seconds <= 0:
            raise ValueError("lease margin must be >= 0 and min lease > 0")

    def lease_seconds(self, remaining_seconds: float) -> float:
        """A lease outlives the attempt that holds it, so a live lease means a live owner."""
        return max(float(self.min_lease_seconds), remaining_seconds + self.lease_margin_seconds)

    def expires_at(self, now: float) -> int:
        """Retention counts from the latest write of any delivery (design.md §3.7), so chained
        redrives (each within 14 days of a close) never meet a record that expired under them."""
        return int(now) + self.retention_seconds
