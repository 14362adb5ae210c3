"""What the ledger reports: each decision (decisions.Decision) and each event, logged and counted.

Observers get the name (the enum's value, e.g. "claimed", "lease_lost"), the request and the
record as it stood, so a test can record which rows were taken and a Lambda logs and counts them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from saga.identity import ActionRequest
from saga.ledger.decisions import Decision
from saga.ledger.records import LedgerRecord


class LedgerEvent(StrEnum):
    """How a write of the ledger ended (decisions are what it found, events what it did)."""

    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RELEASED = "released"  # the lease was given back after a TransientError
    RELEASE_FAILED = "release_failed"  # the lease could not be given up: it simply runs out
    LEASE_LOST = "lease_lost"  # another delivery owns the record: this outcome is not recorded
    RECONCILED = "reconciled"  # the downstream's evidence was recorded
    # an outcome recorded on an action a person settled while this delivery held it (§3.10)
    OUTCOME_AFTER_SETTLEMENT = "outcome_after_settlement"
    # a refund refused by its tenant's daily ceiling, recorded FAILED (§3.12)
    LIMIT_REACHED = "limit_reached"


class LedgerObserver(Protocol):
    def on_decision(
        self, name: str, request: ActionRequest, record: LedgerRecord | None
    ) -> None: ...


METRIC_BY_NAME: dict[str, str] = {
    Decision.CLAIMED: "ActionClaimed",
    Decision.REPLAYED: "ActionReplayed",
    Decision.RECORDED_FAILURE: "ActionReplayed",
    Decision.CONFLICT: "KeyConflict",
    Decision.PENDING: "ActionPending",
    Decision.TAKEOVER: "LeaseTakeover",
    Decision.RESUME_RELEASED: "LeaseTakeover",
    Decision.BUDGET_EXHAUSTED: "BudgetExhausted",
    Decision.LATE_REPLAY: "LateReplay",
    Decision.ESCALATED: "ActionEscalated",
    Decision.SETTLED: "ActionSettled",
    LedgerEvent.UNKNOWN: "OutcomeUnknown",
    LedgerEvent.LEASE_LOST: "OutcomeUnknown",
    LedgerEvent.OUTCOME_AFTER_SETTLEMENT: "OutcomeAfterSettlement",
    LedgerEvent.LIMIT_REACHED: "RefundLimitReached",
}


class PowertoolsObserver:
    """Logs every decision with `action_key`, `case_id`, `status`; emits the EMF metrics."""

    def on_decision(self, name: str, request: ActionRequest, record: LedgerRecord | None) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        from saga.observability import logger, metrics

        logger.info(
            f"ledger decision: {name}",
            extra={
                "action_key": request.key,
                "case_id": request.case_id,
                "status": record.status.value if record else None,
                "decision": name,
                "attempts": record.attempts if record else None,
                "owner": record.owner if record else None,
            },
        )
        metric = METRIC_BY_NAME.get(name)
        if metric is not None:
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
