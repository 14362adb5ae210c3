"""The action ledger (docs/design.md §3): one approved action, at most one business effect.

Modules by job:
- records.py: what the ledger reads, writes and answers (the record, a delivery, evidence)
  and its policy (the attempt budget, the retention, lease sizing);
- decisions.py: the decision table, pure (`decide()`), and the answers that need no write;
- store.py: the table's conditional writes (claim, takeover, reconciliation's, ...);
- outcome_writes.py: a delivery's outcome (alone or with a companion write), a given-back
  lease, the retention rule;
- core.py, external.py, transaction.py, reconcile.py: the operations, behind ActionLedger
  (operations.py);
- observer.py: decisions and events, logged and counted.

The public names are importable from `saga.ledger`.
"""

from saga.identity import ActionRequest
from saga.ledger.decisions import Decision, decide
from saga.ledger.observer import LedgerEvent, LedgerObserver, PowertoolsObserver
from saga.ledger.operations import ActionLedger
from saga.ledger.records import (
    OPEN_STATUSES,
    Absent,
    ActionOutcome,
    Attempt,
    CompanionWrite,
    EffectResult,
    Found,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
    ReconcileAnswer,
    ReconcileDecision,
    Reconciliation,
    Resolution,
    Undeterminable,
)

__all__ = [
    "OPEN_STATUSES",
    "Absent",
    "ActionLedger",
    "ActionOutcome",
    "ActionRequest",
    "Attempt",
    "CompanionWrite",
    "Decision",
    "EffectResult",
    "Found",
    "LedgerEvent",
    "LedgerObserver",
    "LedgerPolicy",
    "LedgerRecord",
    "LedgerStatus",
    "PowertoolsObserver",
    "ReconcileAnswer",
    "ReconcileDecision",
    "Reconciliation",
    "Resolution",
    "Undeterminable",
    "decide",
]
