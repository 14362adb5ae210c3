"""Names of the saga's own metrics that the stack watches (stacks/constructs/monitoring.py):
one place for the functions that emit them and the alarms and dashboard that read them."""

from __future__ import annotations

# A new execution of a recorded case (saga.errors.DuplicateExecution, docs/design.md §4.1): not
# a failure, though Lambda counts it in ValidateCase's Errors; the dashboard takes it out of them.
CASES_DUPLICATE = "CasesDuplicate"
# An effect whose case record refused it (saga.errors.CaseRecordRefused): a person must learn of
# it whether or not the delivery's task is still there to fail; the stack alarms on it.
CASE_RECORD_REFUSED = "CaseRecordRefused"
# The business outcomes, one per case: accepted by ValidateCase; completed with the shipment
# (or by RecordOutcome after a reconciliation); escalated by RecordOutcome.
CASE_OUTCOMES = ("CasesAccepted", CASES_DUPLICATE, "CasesCompleted", "CasesEscalated")
