"""The invariants, checked after every case (on every snapshot) and over every account.
docs/invariants.md is their reader's page: per terminal outcome what must hold, and which
fault makes each allowed alternative honest (fault_campaign.honesty).

Per snapshot here (docs/design.md §3-§5, §8):
- at most one refund, one shipment, one reservation;
- no effect unrecorded: an effect's ledger record exists and says COMPLETED, or UNKNOWN /
  IN_PROGRESS marked as a possible dispatch where a planned fault makes the outcome uncertain;
  never FAILED, never "nothing happened"; a record may be gone only if it was closed and its
  retention passed (an open record never expires, §3.7);
- nothing open disappears: a record once seen stays (closed ones until their retention);
- a COMPLETED record has its effect, with the recorded downstream reference; a reservation
  exists iff the reserve record is COMPLETED; a RELEASED reservation was released by this
  case's release action; stock that shipped is never released;
- the SKU's stock moved by the case's own reservation only (taken while HELD, back once
  RELEASED);
- effects carry exactly the approved parameters (amount, currency, address text, SKU, quantity);
- attempts and re-attempt rounds never exceed the stack's AttemptBudget; another request's
  record under the case's key, a resubmission with other parameters, and an action past its
  budget: fault_campaign/key_checks.py;
- the reconcile tool answers RETRY for the refund only while a re-attempt lands inside the
  payment provider's key retention, counted from the refund's first possible dispatch.
Per execution and per outcome: fault_campaign/outcomes.py and escalated.py; a person's work
(resolutions, redrive attempts, sweeps, time): fault_campaign/operator_checks.py.
Per account: stock conserved (initial - held reservations = available, never negative), every
effect belongs to a case of the account, at most one per case.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from fault_campaign.approval import campaign_ceilings
from fault_campaign.checks import Checks, fields_of
from fault_campaign.key_checks import KeyChecker
from fault_campaign.observe import Snapshot
from fault_campaign.operator_checks import OperatorChecker
from fault_campaign.outcomes import OutcomeChecker
from fault_campaign.overlap import LIVE_OWNER_OVERWRITTEN
from fault_campaign.plan_evidence import LEDGER_RETENTION_SECONDS
from fault_campaign.runner import CaseRun, refund_claims
from saga.ceilings import counter_expires_at
from saga.ledger.records import LedgerPolicy

# operation -> (the Snapshot's list of its effects, the id field its downstream_ref names)
_EFFECT_IDS = {"refund": ("refunds", "refund_id"), "ship": ("shipments", "shipment_id")}
# The shortest lease a delivery holds (the ledger's policy): a re-attempt holds at least this.
MIN_LEASE_SECONDS = LedgerPolicy().min_lease_seconds


@functools.cache
def key_window_seconds() -> float:
    """How long the payment provider deduplicates a refund by its key, as the campaign's stack
    configures it (cdk.json `payment_key_retention_hours`)."""
    from sagactl.config import cdk_config

    return float(cdk_config().payment_key_retention_hours * 3600)


class CaseChecker:
    def __init__(self, run: CaseRun, budget: int, checks: Checks) -> None:
        self.run = run
        self.budget = budget
        self.checks = checks
        self.case = run.plan.case
        self.case_id = run.plan.case_id
        self.last_seen: dict[str, dict[str, Any]] = {}
        self.outcomes = OutcomeChecker(run, budget, checks, self.last_seen)
        self.retries_seen: dict[str, int] = {}  # per execution: RETRY answers judged so far

    # -- effects and records ---------------------------------------------------------------
    def _record_for_effect(self, snap: Snapshot, operation: str, what: str) -> None:
        record = snap.ledger.get(operation)
        if self.outcomes.expired(snap, operation):
            return  # closed, its retention passed since (§3.7): `_kept` judged that
        if record is None:
            self.checks.check(
                "effect_recorded",
                False,
                f"{snap.label}: a {what} exists but no {operation} ledger record (last seen "
                f"{fields_of(self.last_seen.get(operation), 'status', 'expires_at')})",
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
        if status != "COMPLETED":
            self.outcomes.allowed(
                "effect_recorded",
                "effect-unconfirmed",
                snap,
                operation,
                f"{snap.label}: a {what} exists and its record is {status}",
            )

    def _kept(self, snap: Snapshot) -> None:
        """Nothing open disappears: a record once seen stays, unless it was closed and its
        retention passed since (§3.7); an open or settled record never expires."""
        for operation, seen in self.last_seen.items():
            if operation in snap.ledger:
                continue
            closed = seen.get("status") in ("COMPLETED", "FAILED")
            self.checks.check(
                "open_record_kept",
                closed,
                f"{snap.label}: the {operation} record, last seen {seen.get('status')}, is gone",
            )
            if closed:
                seen_expiry = seen.get("expires_at")
                self.checks.check(
                    "record_kept_until_retention",
                    seen_expiry is not None and float(seen_expiry) <= snap.clock,
                    f"{snap.label}: the {operation} record is gone before its retention "
                    f"({seen.get('expires_at')} > {snap.clock})",
                )
                self.outcomes.allowed(
                    "record_kept_until_retention",
                    "closed-record-expired",
                    snap,
                    operation,
                    f"{snap.label}: the closed {operation} record expired",
                )
                self.outcomes.expired_ops[operation] = seen

    def _stock(self, snap: Snapshot, reservation: dict[str, Any] | None) -> None:
        """The SKU's stock moved by the case's own reservation only (cases run one at a time in
        an account): taken while it is HELD, back once RELEASED."""
        before = self.run.stock_before
        if before is None or snap.stock is None:
            return
        held = reservation is not None and reservation.get("status") == "HELD"
        taken = int(self.case["reserve"]["quantity"]) if held else 0
        self.checks.check(
            "stock_follows_reservation",
            before - snap.stock == taken,
            f"{snap.label}: stock {before} before the case, {snap.stock} now, reservation "
            f"{None if reservation is None else reservation.get('status')}",
        )

    def _reservation(self, snap: Snapshot, reservation: dict[str, Any]) -> None:
        """The case's reservation exists iff its reserve record completed (or has expired
        since), and a released one was released by the case's own release."""
        check = self.checks.check
        record = snap.ledger.get("reserve")
        check(
            "reservation_iff_reserved",
            self.outcomes.expired(snap, "reserve", was="COMPLETED")
            or (record is not None and record.get("status") == "COMPLETED"),
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
        self._kept(snap)
        self._stock(snap, reservation)
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
                if operation == "reserve" and not self.outcomes.expired(snap, operation):
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
        self._retries_inside_key_window(snap)

    def _retries_inside_key_window(self, snap: Snapshot) -> None:
        """ "Not found" allows a re-attempt of the refund only while the payment provider still
        deduplicates its key (§3.6: the re-attempt, within its lease, must land before the
        window closes). So every RETRY the reconcile tool answered for it was asked (its
        delivery scheduled, before it decided) at least the shortest lease before the window,
        counted from the refund's first possible dispatch, closed. The record keeps that moment
        for good; each answer is judged at the close of the run that gave it (no record expires
        within a run)."""
        first = (snap.ledger.get("refund") or {}).get("first_dispatch_at")
        for arn, execution in snap.executions.items():
            answers = list(execution.get("retries_answered") or ())
            new, self.retries_seen[arn] = answers[self.retries_seen.get(arn, 0) :], len(answers)
            if first is None:
                continue  # no delivery may have dispatched it: "not found" is proof (§3.6)
            closes = float(first) + key_window_seconds()
            for answer in new:
                if answer.get("step") != "refund":
                    continue
                asked = float(answer.get("scheduled") or 0.0)
                self.checks.check(
                    "retry_inside_key_window",
                    asked + MIN_LEASE_SECONDS < closes,
                    f"{snap.label}: the reconcile tool answered RETRY for the refund asked at "
                    f"{asked:.0f}, {asked - float(first):.0f} s after its first possible "
                    f"dispatch; the provider's key window closed at {closes:.0f}",
                )

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

    def _counters(self, snap: Snapshot, seen: list[Snapshot]) -> None:
        """The daily refund counters (§3.12), against the campaign's own log of claims: each
        equals the refunds charged to it and not given back (the account's earlier cases' and
        this case's records as seen so far), stays within its ceiling, and is gone only once
        its TTL passed."""
        expected = dict(self.run.counters_before)
        for key, minor in refund_claims(self.case, seen).items():
            expected[key] = expected.get(key, 0) + minor
        for key in sorted({*expected, *snap.counters}):
            counter = snap.counters.get(key)
            want = expected.get(key, 0)
            if counter is None:
                day = key.rsplit("#", 1)[-1]
                expired = snap.clock >= counter_expires_at(day, LEDGER_RETENTION_SECONDS)
                self.checks.check(
                    "ceiling_counter_agrees",
                    want == 0 or expired,
                    f"{snap.label}: no counter {key}, the log of claims says {want}",
                )
                continue
            total = int(counter.get("total", 0))
            self.checks.check(
                "ceiling_counter_agrees",
                total == want,
                f"{snap.label}: counter {key} is {total}, the log of claims says {want} "
                f"(before the case {self.run.counters_before.get(key, 0)})",
            )
            tenant, currency, _ = key.split("#")
            ceiling = campaign_ceilings().get(tenant, {}).get(currency, 0)
            self.checks.check(
                "ceiling_never_exceeded",
                0 <= total <= ceiling,
                f"{snap.label}: counter {key} is {total}, the ceiling {ceiling}",
            )

    def _limit_reached(self) -> None:
        """Every REFUND_LIMIT_REACHED escalation made no refund: none at that snapshot or any
        later one, and the refund's record FAILED RefundLimitReached, charged nothing."""
        refused_at: int | None = None
        for index, snap in enumerate(self.run.snapshots):
            for execution in snap.executions.values():
                escalation = (execution.get("output") or {}).get("escalation") or {}
                if escalation.get("reason") == "REFUND_LIMIT_REACHED" and refused_at is None:
                    refused_at = index
            if refused_at is None:
                continue
            record = snap.ledger.get("refund")
            self.checks.check(
                "limit_reached_no_refund",
                not snap.refunds
                and (
                    record is None
                    or (
                        record.get("status") == "FAILED"
                        and (record.get("error") or {}).get("type") == "RefundLimitReached"
                        and not record.get("charged_day")
                    )
                ),
                f"{snap.label}: escalated REFUND_LIMIT_REACHED, {len(snap.refunds)} refunds, "
                f"the refund record {fields_of(record, 'status', 'error', 'charged_day')}",
            )

    def all(self) -> None:
        for index, snap in enumerate(self.run.snapshots):
            self.snapshot(snap)
            self._counters(snap, self.run.snapshots[: index + 1])
            self.outcomes.executions(
                snap,
                final=index == len(self.run.snapshots) - 1
                and self.run.redrives > len(self.run.plan.redrives),
            )
        self.outcomes.same_name()
        self.outcomes.oracle()
        self._limit_reached()
        self._leases()
        KeyChecker(self.run, self.budget, self.checks).all()
        OperatorChecker(self.run, self.checks, self.outcomes.allowed).all()

    def _leases(self) -> None:
        """A lease outlives the attempt that holds it (§3.2): no delivery wrote over a record
        another delivery held while that one still ran, before its function timeout (what the
        overlap nemesis saw: fault_campaign.overlap)."""
        overwritten = [f for f in self.run.fired if f.startswith(LIVE_OWNER_OVERWRITTEN)]
        self.checks.check(
            "lease_outlives_attempt",
            not overwritten,
            f"a delivery wrote over the record of a delivery still running before its function "
            f"timeout (its lease ran out under it): {overwritten}",
        )


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
