"""What an action key and a case id allow (docs/design.md §2, §3.2, §3.4, §5 item 4), checked
over the snapshots of one case:

- another request's record under the case's key is never the case's: the case decides
  `KeyConflict` from it and writes nothing there, so the record stays as that request left it
  (its digest, status, attempt, no owner, no dispatch, no escalation mark); only a person's
  resolution of the case settles it (§3.10);
- one case id, one approved request: a resubmission with other parameters of a case already
  recorded is rejected at the validation with `KeyConflict`, never taken for a duplicate, and
  the case record keeps the first digest;
- past the lifetime budget nothing is dispatched: once an action's every delivery provably sent
  nothing (its lease given back, no `first_dispatch_at`) and its attempts reached the budget,
  no effect can appear and its record never completes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fault_campaign.checks import Checks, fields_of
from fault_campaign.observe import Snapshot, foreign_request
from fault_campaign.paths import classify, stopped_at_validation
from fault_campaign.runner import CaseRun

# What only a delivery of the key's own request writes on a record (§3.1): a foreign record
# carries none of them while the case leaves it alone.
_DELIVERY_FIELDS = (
    "owner",
    "first_dispatch_at",
    "escalated_at",
    "reconcile_rounds",
    "result",
    "downstream_ref",
    "error",
)
OPEN = ("IN_PROGRESS", "UNKNOWN")


def effect_made(snap: Snapshot, operation: str) -> bool:
    """Whether the operation's business effect exists in the snapshot."""
    if operation == "release":
        return any(r.get("status") == "RELEASED" for r in snap.reservations)
    effects = {"reserve": snap.reservations, "refund": snap.refunds, "ship": snap.shipments}
    return bool(effects[operation])


def sent_nothing_and_spent(record: Mapping[str, Any] | None, budget: int) -> bool:
    """The record says every delivery provably sent nothing (§3.4: the lease given back,
    `first_dispatch_at` untouched; nobody holds it) and the attempts reached the budget."""
    return (
        record is not None
        and record.get("status") == "IN_PROGRESS"
        and not record.get("owner")
        and "first_dispatch_at" not in record
        and int(record.get("attempts", 0)) >= budget
    )


class KeyChecker:
    def __init__(self, run: CaseRun, budget: int, checks: Checks) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        self.foreign = {
            str(n["operation"]): foreign_request(run.plan.case, str(n["operation"])).digest
            for n in run.plan.nemeses
            if n["kind"] == "foreign_record"
        }

    def all(self) -> None:
        spent: dict[str, str] = {}  # operation -> the label of the snapshot it was spent at
        for index, snap in enumerate(self.run.snapshots):
            self._foreign_records(snap)
            self._past_budget(snap, spent)
            if (self.run.plan.duplicate or {}).get("when") == "changed" and index:
                self._changed_resubmission(snap, self.run.snapshots[index - 1])

    # -- another request under the case's key (§2, §3.2) -----------------------------------
    def _foreign_records(self, snap: Snapshot) -> None:
        resolved = bool((snap.case_record or {}).get("resolution"))
        for operation, digest in self.foreign.items():
            record = snap.ledger.get(operation)
            written = [name for name in _DELIVERY_FIELDS if (record or {}).get(name)]
            self.checks.check(
                "foreign_record_untouched",
                record is not None
                and record.get("request_digest") == digest
                and record.get("status") == "IN_PROGRESS"
                and int(record.get("attempts", 0)) == 1
                and record.get("claimed_at") == record.get("created_at")
                and not written
                and (resolved or not record.get("resolution")),
                f"{snap.label}: the {operation} key holds another request's record (digest "
                f"{digest}); the case must decide KeyConflict and write nothing there, but it is "
                f"{fields_of(record, 'request_digest', 'status', 'attempts', 'resolution')}"
                f"{f', with {written}' if written else ''}",
            )

    # -- one case id, one approved request (§5 item 4, §8) ---------------------------------
    def _changed_resubmission(self, snap: Snapshot, before: Snapshot) -> None:
        recorded = before.case_record
        if recorded is None:
            return  # the case was never recorded: the resubmission is the first request
        for execution in snap.executions.values():
            if not execution["name"].endswith("-again") or execution["arn"] in before.executions:
                continue
            kind = classify(execution)
            # Stopped in the validation by a retried error (a planned fault on it: judged with
            # the other stopped executions, fault_campaign.outcomes), it decided nothing.
            undecided = kind == "FAILED_RESUMABLE" and stopped_at_validation(execution)
            digest = (snap.case_record or {}).get("digest")
            self.checks.check(
                "changed_resubmission_rejected",
                (undecided or (kind == "REJECTED" and execution.get("error") == "KeyConflict"))
                and digest == recorded.get("digest"),
                f"{snap.label}: {execution['name']} (the case id with other parameters) ended "
                f"{kind} {execution.get('error')}; the case record's digest "
                f"{recorded.get('digest')} before it, {digest} after",
            )

    # -- the lifetime budget (§3.2) --------------------------------------------------------
    def _past_budget(self, snap: Snapshot, spent: dict[str, str]) -> None:
        for operation, since in spent.items():
            record = self._own(snap, operation)
            self.checks.check(
                "no_dispatch_past_budget",
                not effect_made(snap, operation)
                and (record or {}).get("status") not in ("COMPLETED", "FAILED"),
                f"{snap.label}: the {operation} action's {self.budget} attempts were spent by "
                f"{since}, every one provably sending nothing; now its effect exists "
                f"({effect_made(snap, operation)}) and its record is "
                f"{fields_of(record, 'status', 'attempts')}",
            )
        for operation in ("reserve", "refund", "ship", "release"):
            if operation in spent or effect_made(snap, operation):
                continue
            if sent_nothing_and_spent(self._own(snap, operation), self.budget):
                spent[operation] = snap.label

    def _own(self, snap: Snapshot, operation: str) -> Mapping[str, Any] | None:
        record = snap.ledger.get(operation)
        foreign = operation in self.foreign
        if record is None or (foreign and record.get("request_digest") == self.foreign[operation]):
            return None
        return record
