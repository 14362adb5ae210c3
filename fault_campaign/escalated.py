"""What an ESCALATED case must show, per reason (docs/invariants.md; docs/design.md §5).

For every reason: the case record and the escalation message say what the execution output
says; the output's confirmed effects are exactly the forward actions the ledger recorded
COMPLETED; the reason is honest for the case's plan (fault_campaign.honesty); no step after
the one that escalated left an effect. Then per reason: what the ledger must hold for the step,
and whether the reservation was compensated (released by the case's own release, the stock
back) or the release was blocked where blocking is honest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fault_campaign.checks import fields_of
from fault_campaign.observe import Snapshot

if TYPE_CHECKING:
    from fault_campaign.outcomes import OutcomeChecker

STEPS = ("reserve", "refund", "ship")
ESCALATION_REASONS = frozenset(
    {
        "OUT_OF_STOCK",
        "REFUND_REJECTED",
        "REFUND_LIMIT_REACHED",
        "SHIPMENT_REJECTED",
        "REJECTED_AFTER_EFFECTS",
        "OUTCOME_UNCERTAIN",
        "RECONCILIATION_FAILED",
    }
)
# reason -> (the step it must name, or None for "the step that escalated"; the error the
# step's record must hold, FAILED; whether the reservation is compensated)
_REASONS: Mapping[str, tuple[str | None, str | None]] = {
    "OUT_OF_STOCK": ("reserve", "OutOfStock"),
    "REFUND_REJECTED": ("refund", "RefundRejected"),
    "REFUND_LIMIT_REACHED": ("refund", "RefundLimitReached"),
    "SHIPMENT_REJECTED": ("ship", "ShipmentRejected"),
    "REJECTED_AFTER_EFFECTS": (None, None),
    "OUTCOME_UNCERTAIN": (None, None),
    "RECONCILIATION_FAILED": (None, None),
}
_EFFECTS = {"reserve": "reservations", "refund": "refunds", "ship": "shipments"}


def as_list(value: Any) -> list[Any]:
    """A JSONata sequence as the message carries it: absent, one value, or an array."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def compensates(reason: str, step: str | None) -> bool:
    """Whether the workflow must compensate the reservation (docs/design.md §5): a rejection
    of the refund or the shipment, by the downstream or by the key."""
    return reason in ("REFUND_REJECTED", "REFUND_LIMIT_REACHED", "SHIPMENT_REJECTED") or (
        reason == "REJECTED_AFTER_EFFECTS" and step in ("refund", "ship")
    )


class EscalationChecks:
    def __init__(self, outcome: OutcomeChecker) -> None:
        self.outcome = outcome
        self.check = outcome.checks.check

    def escalated(self, snap: Snapshot, arn: str, execution: Mapping[str, Any]) -> None:
        output = execution.get("output") or {}
        escalation = output.get("escalation") or {}
        reason = str(escalation.get("reason"))
        step = escalation.get("step")
        label = f"{snap.label}: {execution['name']} ESCALATED {reason} at {step}"
        self.check("escalation_reason", reason in ESCALATION_REASONS, label)
        if reason not in ESCALATION_REASONS:
            return
        named, error = _REASONS[reason]
        self.check("escalation_reason", step == named or (named is None and step in STEPS), label)
        self._record(snap, arn, output, label)
        self._confirmed(snap, output, reason, step, label)
        self._message(snap, arn, output, label)
        self.outcome.allowed(
            "escalation_honest",
            reason,
            snap,
            step if reason != "OUT_OF_STOCK" else "reserve",
            label,
            limit=escalation.get("limit"),
        )
        if error is not None and not self.outcome.expired(snap, str(step)):
            record = snap.ledger.get(str(step)) or {}
            self.check(
                "escalation_honest",
                record.get("status") == "FAILED"
                and (record.get("error") or {}).get("type") == error,
                f"{label}: the {step} record is {fields_of(record, 'status', 'error')}",
            )
        self._nothing_after(snap, str(step), reason, label)
        if reason == "OUTCOME_UNCERTAIN":
            self._uncertain(snap, str(step), label)
        if compensates(reason, step):
            self._compensated(snap, output, escalation, label)
        else:
            self._not_compensated(snap, output, label)

    # -- what every escalation says --------------------------------------------------------
    def _record(self, snap: Snapshot, arn: str, output: Mapping[str, Any], label: str) -> None:
        record = snap.case_record or {}
        recorded = record.get("escalation") or {}
        escalation = output.get("escalation") or {}
        self.check(
            "case_record_agrees",
            record.get("outcome") == "ESCALATED"
            and record.get("execution_arn") == arn
            and (recorded.get("reason"), recorded.get("step"))
            == (escalation.get("reason"), escalation.get("step"))
            and _refs(record.get("steps")) == _refs(output.get("steps")),
            f"{label}: case record {fields_of(record, 'outcome', 'execution_arn')}, escalation "
            f"{fields_of(recorded, 'reason', 'step')}",
        )

    def _confirmed(
        self, snap: Snapshot, output: Mapping[str, Any], reason: str, step: Any, label: str
    ) -> None:
        """The output's confirmed effects are the forward actions the ledger has COMPLETED."""
        reported = set((output.get("steps") or {}).keys())
        completed = {op for op in STEPS if (snap.ledger.get(op) or {}).get("status") == "COMPLETED"}
        # An effect recorded COMPLETED after its step's own record expired is still reported.
        expired = {
            op for op in reported - completed if self.outcome.expired(snap, op, was="COMPLETED")
        }
        unreported = completed - reported
        if unreported and reason == "RECONCILIATION_FAILED" and unreported == {step}:
            self.outcome.allowed(
                "confirmed_effects_reported",
                "step-completed-unreported",
                snap,
                str(step),
                f"{label}: {step} COMPLETED in the ledger, not in the escalation",
            )
            unreported = set()
        self.check(
            "confirmed_effects_reported",
            not unreported and reported - expired <= completed,
            f"{label}: the output confirms {sorted(reported)}, the ledger has {sorted(completed)}"
            " COMPLETED",
        )

    def _message(self, snap: Snapshot, arn: str, output: Mapping[str, Any], label: str) -> None:
        """Each CASE_ESCALATED message of the execution says what the output says."""
        messages = self.outcome.messages(arn, "CASE_ESCALATED")
        escalation = output.get("escalation") or {}
        confirmed = {
            (s.get("action_key"), s.get("downstream_ref"))
            for s in (output.get("steps") or {}).values()
        }
        compensated = [c.get("action_key") for c in output.get("compensations") or []]
        released = (snap.ledger.get("release") or {}).get(
            "status"
        ) == "COMPLETED" or self.outcome.expired(snap, "release", was="COMPLETED")
        self.check("queue_agrees", bool(messages), f"{label}: no escalation message")
        for message in messages:
            said = {
                (e.get("action_key"), e.get("downstream_ref"))
                for e in as_list(message.get("confirmed_effects"))
            }
            self.check(
                "queue_agrees",
                (message.get("reason"), message.get("step"))
                == (escalation.get("reason"), escalation.get("step"))
                and message.get("case_id") == self.outcome.run.plan.case_id
                and message.get("compensation_blocked") == escalation.get("compensation_blocked")
                and said == confirmed
                and as_list(message.get("compensated")) == compensated
                and released == bool(compensated),
                f"{label}: message {message.get('reason')} at {message.get('step')}, confirmed "
                f"{sorted(map(str, said))}, compensated {message.get('compensated')}, blocked "
                f"{message.get('compensation_blocked')}; output confirmed "
                f"{sorted(map(str, confirmed))}, compensated {compensated}; release record "
                f"COMPLETED {released}",
            )

    # -- per reason ------------------------------------------------------------------------
    def _nothing_after(self, snap: Snapshot, step: str, reason: str, label: str) -> None:
        """No step after the one that escalated acted; nor did that step, unless uncertain."""
        if step not in STEPS:
            return
        later = STEPS[STEPS.index(step) + (1 if reason in _OPEN_REASONS else 0) :]
        acted = [op for op in later if getattr(snap, _EFFECTS[op])]
        recorded = [
            op
            for op in STEPS[STEPS.index(step) + 1 :]
            if (self.outcome.own(snap, op) or {}).get("status") not in (None, "SETTLED")
        ]
        self.check(
            "nothing_after_escalation",
            not acted and not recorded,
            f"{label}: effects of {acted}, records of {recorded}",
        )

    def _uncertain(self, snap: Snapshot, step: str, label: str) -> None:
        """The step's outcome is open in the ledger, and marked escalated (§3.8)."""
        record = snap.ledger.get(step) or {}
        self.check(
            "uncertain_is_open",
            record.get("status") in ("UNKNOWN", "IN_PROGRESS") and "escalated_at" in record,
            f"{label}: the {step} record is {fields_of(record, 'status', 'escalated_at')}",
        )

    def _compensated(
        self,
        snap: Snapshot,
        output: Mapping[str, Any],
        escalation: Mapping[str, Any],
        label: str,
    ) -> None:
        reservation = snap.reservations[0] if snap.reservations else {}
        released = reservation.get("status") == "RELEASED"
        blocked = escalation.get("compensation_blocked")
        # §5.1: a shipment action that may have happened (its record, this case's or a foreign
        # request's under the key, open or done) may have consumed the stock: never released.
        ship = (snap.ledger.get("ship") or {}).get("status")
        self.check(
            "release_only_if_nothing_shipped",
            not (released and ship in ("COMPLETED", "IN_PROGRESS", "UNKNOWN")),
            f"{label}: reservation released while the shipment's record is {ship}",
        )
        self.check(
            "compensated_or_said_so",
            (released and not blocked) or (bool(blocked) and reservation.get("status") == "HELD"),
            f"{label}: reservation {reservation.get('status')}, blocked {blocked}",
        )
        if blocked:
            self.outcome.allowed(
                "compensated_or_said_so",
                "compensation-blocked",
                snap,
                "release",
                f"{label}: the release was blocked ({str(blocked)[:200]})",
            )
        self.check(
            "compensated_or_said_so",
            released == bool(output.get("compensations")),
            f"{label}: reservation {reservation.get('status')}, compensations in the output "
            f"{output.get('compensations')}",
        )

    def _not_compensated(self, snap: Snapshot, output: Mapping[str, Any], label: str) -> None:
        reservation = snap.reservations[0] if snap.reservations else {}
        self.check(
            "compensated_only_after_rejection",
            (self.outcome.own(snap, "release") or {}).get("status") in (None, "SETTLED")
            and not output.get("compensations")
            and reservation.get("status") != "RELEASED",
            f"{label}: release record {fields_of(snap.ledger.get('release'), 'status')}, "
            f"reservation {reservation.get('status')}",
        )


# Reasons whose step may itself have acted (its outcome is not known, or not reported).
_OPEN_REASONS = frozenset({"OUTCOME_UNCERTAIN", "RECONCILIATION_FAILED"})


def _refs(steps: Any) -> dict[str, Any]:
    if not isinstance(steps, Mapping):
        return {}
    return {
        name: (step or {}).get("downstream_ref")
        for name, step in steps.items()
        if isinstance(step, Mapping)
    }
