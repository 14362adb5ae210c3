"""The invariants, checked after every case (on every snapshot) and over every account.

Per case (issue 14, docs/design.md §3-§5, §8):
- at most one refund, one shipment, one reservation;
- no effect unrecorded: an effect's ledger record exists (unless its retention passed since it
  was last seen) and says COMPLETED or UNKNOWN, or IN_PROGRESS held by an owner or marked with
  `first_dispatch_at`; never FAILED, never "nothing happened" (IN_PROGRESS with no owner and no
  `first_dispatch_at`);
- a COMPLETED record has its effect, with the recorded downstream reference; a reservation
  exists iff the reserve record is COMPLETED; a RELEASED reservation was released by this
  case's release action; stock that shipped is never released;
- effects carry exactly the approved parameters (amount, currency, address text, SKU, quantity);
- attempts and re-attempt rounds never exceed the stack's AttemptBudget;
- every execution ends in a state of the closed list: COMPLETED, ESCALATED, DUPLICATE, REJECTED
  (FAILED at ValidateCase, nothing done), FAILED_RESUMABLE (FAILED at a forward step after its
  transient retries, case IN_PROGRESS) or COMPENSATION_PENDING (FAILED at the release); the
  last two only before a redrive, or, after the cause was removed and a redrive, with the
  step's budget spent (a person decides). Each agrees with the case record, the ledger, the
  effects and the escalation queue;
- at most one execution of a case runs forward; a duplicate points at the owner;
- a clean case (no fault, enough stock) completes; a case generated invalid is rejected with
  its error, a valid one never is.
Per account: stock conserved (initial - held reservations = available, never negative), every
effect belongs to a case of the account, at most one per case.

The checks of effects and records are here; those of executions and outcomes (from "every
execution ends" on) in sagactl/campaign/outcomes.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sagactl.campaign.checks import Checks
from sagactl.campaign.observe import Snapshot
from sagactl.campaign.outcomes import OutcomeChecker
from sagactl.campaign.runner import CaseRun

# operation -> (the Snapshot's list of its effects, the id field its downstream_ref names)
_EFFECT_IDS = {"refund": ("refunds", "refund_id"), "ship": ("shipments", "shipment_id")}


class CaseChecker:
    def __init__(self, run: CaseRun, budget: int, checks: Checks) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        self.case = run.plan.case
        self.case_id = run.plan.case_id
        self.last_seen: dict[str, dict[str, Any]] = {}
        self.outcomes = OutcomeChecker(run, budget, checks, self.last_seen)

    # -- effects and records ---------------------------------------------------------------
    def _record_for_effect(self, snap: Snapshot, operation: str, what: str) -> None:
        record = snap.ledger.get(operation)
        if record is None:
            seen = self.last_seen.get(operation)
            expired = seen is not None and float(seen.get("expires_at", 0)) <= snap.clock
            self.checks.check(
                "effect_recorded",
                expired,
                f"{snap.label}: a {what} exists but no {operation} ledger record"
                + ("" if seen is None else f" (last seen expiring at {seen.get('expires_at')})"),
            )
            return
        status = record.get("status")
        nothing_happened = (
            status == "IN_PROGRESS"
            and not record.get("owner")
            and "first_dispatch_at" not in record
        )
        self.checks.check(
            "effect_recorded",
            status in ("COMPLETED", "UNKNOWN", "IN_PROGRESS") and not nothing_happened,
            f"{snap.label}: a {what} exists but the {operation} record is {status}"
            + (" with no owner and no first_dispatch_at" if nothing_happened else ""),
        )

    def _reservation(self, snap: Snapshot, reservation: dict[str, Any]) -> None:
        """The case's reservation exists iff its reserve record completed (or has expired
        since), and a released one was released by the case's own release."""
        check = self.checks.check
        record = snap.ledger.get("reserve")
        seen = self.last_seen.get("reserve")
        expired = (
            record is None and seen is not None and float(seen.get("expires_at", 0)) <= snap.clock
        )
        check(
            "reservation_iff_reserved",
            expired or (record is not None and record.get("status") == "COMPLETED"),
            f"{snap.label}: reservation {reservation.get('status')} but reserve record "
            f"{None if record is None else record.get('status')}",
        )
        if reservation.get("status") == "RELEASED":
            self._record_for_effect(snap, "release", "released reservation")
            check(
                "released_by_own_release",
                str(reservation.get("released_by", "")).endswith(
                    f"#release#{self.case_id}.reserve"
                ),
                f"{snap.label}: released by {reservation.get('released_by')}",
            )

    def snapshot(self, snap: Snapshot) -> None:
        check = self.checks.check
        label = snap.label
        check("one_refund", len(snap.refunds) <= 1, f"{label}: {len(snap.refunds)} refunds")
        check("one_shipment", len(snap.shipments) <= 1, f"{label}: {len(snap.shipments)} shipments")
        check(
            "one_reservation",
            len(snap.reservations) <= 1,
            f"{label}: {len(snap.reservations)} reservations",
        )
        reservation = snap.reservations[0] if snap.reservations else None
        if snap.refunds:
            self._record_for_effect(snap, "refund", "refund")
        if snap.shipments:
            self._record_for_effect(snap, "ship", "shipment")
        if reservation is not None:
            self._reservation(snap, reservation)
        check(
            "shipped_stock_not_released",
            not (snap.shipments and reservation and reservation.get("status") == "RELEASED"),
            f"{label}: a shipment exists and the reservation was released",
        )
        for operation, record in snap.ledger.items():
            self.last_seen[operation] = record
            check(
                "attempts_within_budget",
                int(record.get("attempts", 0)) <= self.budget
                and int(record.get("reconcile_rounds", 0)) <= self.budget,
                f"{label}: {operation} attempts {record.get('attempts')}, rounds "
                f"{record.get('reconcile_rounds', 0)}, budget {self.budget}",
            )
            status = record.get("status")
            if status != "COMPLETED":
                if operation == "reserve":
                    check(
                        "reservation_iff_reserved",
                        reservation is None,
                        f"{label}: reserve {status} but a reservation exists",
                    )
                continue
            ref = record.get("downstream_ref")
            if operation in _EFFECT_IDS:
                effects, id_field = _EFFECT_IDS[operation]
                ids = [effect.get(id_field) for effect in getattr(snap, effects)]
                check(
                    "completed_has_effect",
                    ids == [ref],
                    f"{label}: {operation} COMPLETED ref {ref}, {effects} {ids}",
                )
            elif operation == "reserve":
                check(
                    "completed_has_effect",
                    reservation is not None,
                    f"{label}: reserve COMPLETED and no reservation",
                )
            elif operation == "release":
                check(
                    "completed_has_effect",
                    reservation is not None
                    and reservation.get("status") == "RELEASED"
                    and reservation.get("released_by") == record.get("action_key"),
                    f"{label}: release COMPLETED, reservation {reservation}",
                )
        self._parameters(snap)

    def _parameters(self, snap: Snapshot) -> None:
        case = self._owner_input(snap)
        for refund in snap.refunds:
            expected = case["refund"]
            self.checks.check(
                "effect_parameters",
                (
                    refund.get("amount_minor"),
                    refund.get("currency"),
                    refund.get("payment_reference"),
                )
                == (expected["amount_minor"], expected["currency"], expected["payment_reference"]),
                f"{snap.label}: refund {refund} for {expected}",
            )
        for shipment in snap.shipments:
            self.checks.check(
                "effect_parameters",
                shipment.get("address") == case["shipment"]["address"]
                and shipment.get("sku") == case["reserve"]["sku"]
                and shipment.get("quantity") == case["reserve"]["quantity"],
                f"{snap.label}: shipment {shipment} for {case['shipment']} {case['reserve']}",
            )
        for reservation in snap.reservations:
            self.checks.check(
                "effect_parameters",
                (reservation.get("sku"), reservation.get("quantity"))
                == (case["reserve"]["sku"], case["reserve"]["quantity"]),
                f"{snap.label}: reservation {reservation} for {case['reserve']}",
            )

    def _owner_input(self, snap: Snapshot) -> Mapping[str, Any]:
        # Every generated input of a case has the same parameters but a changed resubmission's,
        # which is never the owner (the case record binds the first).
        return self.case

    def all(self) -> None:
        for index, snap in enumerate(self.run.snapshots):
            self.snapshot(snap)
            self.outcomes.executions(
                snap,
                final=index == len(self.run.snapshots) - 1
                and self.run.redrives > len(self.run.plan.redrives),
            )
        self.outcomes.same_name()
        self.outcomes.oracle()


def check_case(run: CaseRun, budget: int) -> Checks:
    checks = Checks()
    CaseChecker(run, budget, checks).all()
    return checks


def check_account(  # noqa: PLR0917 (what one account holds, read once)
    runs: Iterable[CaseRun],
    initial_stock: Mapping[str, int],
    available: Mapping[str, int | None],
    reservations: list[dict[str, Any]],
    refunds: list[dict[str, Any]],
    shipments: list[dict[str, Any]],
) -> Checks:
    """Over one account (a block of cases): stock conserved, effects belong to its cases."""
    checks = Checks()
    case_ids = {run.plan.case_id for run in runs}
    held: Counter[str] = Counter()
    for reservation in reservations:
        if reservation.get("status") == "HELD":
            held[str(reservation.get("sku"))] += int(reservation.get("quantity", 0))
    for sku, initial in initial_stock.items():
        now = available.get(sku)
        checks.check(
            "stock_conserved",
            now is not None and now >= 0 and initial - held[sku] == now,
            f"{sku}: initial {initial} - held {held[sku]} != available {now}",
        )
    for name, items in (
        ("reservations", reservations),
        ("refunds", refunds),
        ("shipments", shipments),
    ):
        per_case = Counter(str(item.get("case_id")) for item in items)
        for case_id, count in per_case.items():
            checks.check(
                "effects_belong_to_cases",
                case_id in case_ids and count <= 1,
                f"{name}: {count} for case {case_id}"
                + ("" if case_id in case_ids else " (not a case of this account)"),
            )
    return checks
