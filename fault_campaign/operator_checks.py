"""What must hold of a person's work (docs/design.md §3.7, §3.10, §5 item 6, §6): the operator
nemesis's steps (fault_campaign.operator), judged against the snapshot each one left.

- a resolution is taken only for an open case (ESCALATED, or its execution stopped with work
  left), refused otherwise (a live lease: `ActionInFlight`); it settles every action of the case
  in one go: the case record gains the resolution and keeps its outcome, an open record keeps
  its status and gains the resolution (out of the open-actions index), a missing one is written
  SETTLED, a closed one stays as it was;
- a resolved case never acts again: no effect, no record, no stock, no case-record change after
  it (but for the outcome of a delivery that still ran as its action was settled, written over
  the settlement as §3.10 says, where a planned fault held it: `outcome-after-settlement`);
  every rerun is refused (`sagactl redrive` refuses, a plain redrive ends FAILED with
  ActionSettled) and no message asks a person again;
- a case whose execution stopped while a delivery holds one of its actions (a live lease, on
  the settling clock) is not resolved: `ActionInFlight` (`resolve:in-flight`, the overlap
  nemesis's abort);
- an open action stays reported until settled: every sweep lists each open, unsettled action
  of the case whose lease ended more than the grace before it, and none that is settled or
  closed. (That nothing open disappears, across a jump past the retention too, is checked on
  every snapshot: fault_campaign.invariants.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fault_campaign.checks import Checks
from fault_campaign.observe import Snapshot
from fault_campaign.overlap import AT_RECONCILIATION, RESOLVE_IN_FLIGHT, held
from fault_campaign.paths import APPROVAL_ERROR, COMPLETING_STATE, RELEASE_STATE, SETTLED_ERROR
from fault_campaign.runner import CaseRun
from saga.tools.sweeper import DEFAULT_GRACE_SECONDS

OPEN = ("IN_PROGRESS", "UNKNOWN")
# (invariant, alternative, snapshot, step, detail) -> whether a planned fault makes it honest
Allowed = Callable[[str, str, Snapshot | None, str | None, str], bool]
STOPPED = ("FAILED", "TIMED_OUT", "ABORTED")
NEEDS_A_PERSON = ("CASE_ESCALATED", "EXECUTION_NOT_SUCCEEDED", "STUCK_ACTION")


def _case_open(snap: Snapshot, owner_arn: str | None) -> bool:
    """The worklist's rule (§5, item 6), judged from the snapshot."""
    record = snap.case_record
    if record is None or record.get("resolution"):
        return False
    if record.get("outcome") == "ESCALATED":
        return True
    owner = snap.executions.get(str(record.get("execution_arn") or owner_arn)) or {}
    return owner.get("status") in STOPPED and record.get("outcome") in (
        "IN_PROGRESS",
        "COMPENSATION_PENDING",
    )


def _live_lease(snap: Snapshot) -> bool:
    """Whether a delivery may still hold an action on the settling clock (§3.10: a lease counts
    as live until the clocks' skew after it ends)."""
    return any(
        r.get("owner") and held(float(r.get("lease_expires_at", 0)), snap.clock)
        for r in snap.ledger.values()
    )


def _expired_by(record: Mapping[str, Any], clock: float) -> bool:
    expires_at = record.get("expires_at")
    return (
        record.get("status") in ("COMPLETED", "FAILED")
        and expires_at is not None
        and float(expires_at) <= clock
    )


def _outcome_after_settlement(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The delivery that held an IN_PROGRESS record wrote its outcome over the person's
    settlement (§3.10): same owner, the resolution kept, no open_status, no retention."""
    return (
        old.get("status") == "IN_PROGRESS"
        and new.get("status") in ("COMPLETED", "UNKNOWN", "FAILED")
        and new.get("owner") == old.get("owner")
        and bool(new.get("resolution"))
        and (not old.get("resolution") or new.get("resolution") == old.get("resolution"))
        and not {"open_status", "expires_at"} & set(new)
    )


def _same(before: Snapshot, after: Snapshot) -> bool:
    return (
        _effects(before) == _effects(after)
        and before.ledger == after.ledger
        and before.case_record == after.case_record
    )


def _effects(snap: Snapshot) -> tuple[Any, ...]:
    return (snap.refunds, snap.shipments, snap.reservations, snap.stock)


class OperatorChecker:
    def __init__(self, run: CaseRun, checks: Checks, allowed: Allowed) -> None:
        self.run = run
        self.checks = checks
        self.allowed = allowed  # OutcomeChecker.allowed: a planned fault makes it honest
        self.resolved_at: int | None = None  # the snapshot the resolution left

    def all(self) -> None:
        for event in self.run.operator:
            if event["step"] == RESOLVE_IN_FLIGHT:
                self._resolve_in_flight(event)
                continue
            snap = self.run.snapshots[event["snapshot"]]
            before = self.run.snapshots[event["snapshot"] - 1]
            if event["step"] == "sweep":
                self._sweep(event, snap)
            elif event["step"] == "resolve":
                self._resolve(event, before, snap)
            elif event["step"].startswith("redrive:"):
                self._redrive(event, snap)
            elif event["step"] == "late":
                self._late(event, before, snap)
        if self.resolved_at is not None:
            self._never_acts_again()

    # -- the sweeper ---------------------------------------------------------------------------
    def _sweep(self, event: Mapping[str, Any], snap: Snapshot) -> None:
        report = event.get("report") or {}
        self.checks.check(
            "sweeper_runs", "error" not in event, f"{snap.label}: {event.get('message')}"
        )
        listed = set(report.get("action_keys") or [])
        for operation, record in snap.ledger.items():
            key = record.get("action_key")
            stuck = (
                record.get("status") in OPEN
                and not record.get("resolution")
                and float(record.get("lease_expires_at", 0)) < snap.clock - DEFAULT_GRACE_SECONDS
            )
            self.checks.check(
                "open_action_reported",
                (key in listed) == stuck,
                f"{snap.label}: the {operation} action ({record.get('status')}, resolution "
                f"{bool(record.get('resolution'))}) is {'' if key in listed else 'not '}listed "
                "by the sweeper",
            )
        for message in self._messages(event, "STUCK_ACTION"):
            parts = str(message.get("action_key", "")).split("#")
            record = snap.ledger.get(parts[1] if len(parts) > 1 else "") or {}
            self.checks.check(
                "open_action_reported",
                record.get("status") in OPEN and not record.get("resolution"),
                f"{snap.label}: a stuck-action message for {message.get('action_key')}, "
                f"which is {record.get('status')} (resolution {bool(record.get('resolution'))})",
            )

    # -- a person's decision -------------------------------------------------------------------
    def _resolve(self, event: Mapping[str, Any], before: Snapshot, snap: Snapshot) -> None:
        was_open = _case_open(before, self.run.owner_arn)
        if not event.get("resolved"):
            error = event.get("error")
            honest = (not was_open and error in ("CaseNotOpen", "AlreadyResolved", "NotFound")) or (
                error == "ActionInFlight" and _live_lease(before)
            )
            self.checks.check(
                "resolve_only_open",
                honest,
                f"{snap.label}: resolve refused ({error}: {event.get('message')}); the case was "
                f"{'open' if was_open else 'not open'}",
            )
            return
        self.checks.check(
            "resolve_only_open", was_open, f"{snap.label}: a case that was not open was resolved"
        )
        self.resolved_at = event["snapshot"]
        self._settled(event, before, snap)

    def _resolve_in_flight(self, event: Mapping[str, Any]) -> None:
        """The case's execution stopped while a delivery held one of its actions, its lease
        live on the settling clock (§3.10's rule, skew included: fault_campaign.overlap): the
        decision is refused with ActionInFlight and nothing is resolved. Settling it would let
        the delivery act on a resolved case (its dispatch, or its outcome, after the decision).
        Then the delivery completes: its effect and record are judged with every snapshot."""
        if event.get("skipped"):
            return
        if event.get("at") == AT_RECONCILIATION:
            # Stopped while only its reconciliation ran: nothing holds an action, the case is
            # open (its execution stopped, its record IN_PROGRESS): the decision is taken.
            self.checks.check(
                "resolve_only_open",
                bool(event.get("resolved")),
                f"resolve while the execution ({event.get('execution_status')}) was stopped at "
                f"the {event.get('action')} reconciliation: answered {event.get('error')} "
                f"({event.get('message')})",
            )
            return
        # The rule binds a lease live on the settling clock, read between `clock` and
        # `clock_after`: one live until after the decision returned was live when it was read.
        ran_out = not held(float(event["lease"]), float(event.get("clock_after", event["clock"])))
        self.checks.check(
            "settle_refuses_live_lease",
            (event.get("error") == "ActionInFlight" and not event.get("resolved")) or ran_out,
            f"resolve while the {event.get('action')} delivery (held at its {event.get('at')}) "
            f"had its lease until {event.get('lease')}, clock {event.get('clock')} to "
            f"{event.get('clock_after')}, execution "
            f"{event.get('execution_status')}: answered {event.get('error') or 'resolved'} "
            f"({event.get('message')}), settled {event.get('settled')}",
        )

    def _settled(self, event: Mapping[str, Any], before: Snapshot, snap: Snapshot) -> None:
        record = snap.case_record or {}
        resolution = record.get("resolution") or {}
        previous = before.case_record or {}
        settled = set(event.get("settled") or [])
        self.checks.check(
            "resolution_settles",
            {k: v for k, v in record.items() if k != "resolution"}
            == {k: v for k, v in previous.items() if k != "resolution"}
            and resolution.get("by") == "operator@campaign"
            and set(resolution.get("settled_actions") or []) == settled,
            f"{snap.label}: case record {record.get('outcome')} (was {previous.get('outcome')}), "
            f"resolution {resolution.get('by')}, settled {sorted(settled)}",
        )
        for operation in ("reserve", "refund", "ship", "release"):
            old = before.ledger.get(operation)
            new = snap.ledger.get(operation) or {}
            if old is not None and old.get("status") not in OPEN:
                expect_settled, ok = False, new == old  # closed: it says what happened
            elif old is not None:
                expect_settled = True
                ok = (
                    new.get("status") == old.get("status")
                    and bool(new.get("resolution"))
                    and "open_status" not in new
                    and "expires_at" not in new
                )
                if not ok and _outcome_after_settlement(old, new):
                    ok = self.allowed(
                        "resolution_settles",
                        "outcome-after-settlement",
                        snap,
                        operation,
                        f"{snap.label}: {operation} was {old.get('status')}, its delivery wrote "
                        f"{new.get('status')} after the settlement",
                    )
            else:
                expect_settled = True
                ok = (
                    new.get("status") == "SETTLED"
                    and bool(new.get("resolution"))
                    and not {"request_digest", "open_status", "expires_at"} & set(new)
                )
            self.checks.check(
                "resolution_settles",
                ok and (new.get("action_key") in settled) == expect_settled,
                f"{snap.label}: {operation} was {None if old is None else old.get('status')}, "
                f"now {new.get('status')} (resolution {bool(new.get('resolution'))}, open_status "
                f"{new.get('open_status')}), settled {new.get('action_key') in settled}",
            )

    def _redrive(self, event: Mapping[str, Any], snap: Snapshot) -> None:
        if self.resolved_at is None or event["snapshot"] < self.resolved_at:
            return  # a redrive before any decision is an ordinary redrive
        if event["step"] == "redrive:sagactl":
            self.checks.check(
                "rerun_refused",
                event.get("refused") == "RedriveRefused"
                and "resolved" in str(event.get("message")),
                f"{snap.label}: sagactl redrive of a resolved case: {event}",
            )
            return
        arn = event.get("redriven")
        execution = snap.executions.get(str(arn)) or {}
        self.checks.check(
            "rerun_refused",
            (arn is None and event.get("refused") == "ExecutionNotRedrivable")
            or (execution.get("status"), execution.get("error")) == ("FAILED", SETTLED_ERROR),
            f"{snap.label}: a plain redrive of a resolved case: {event.get('refused')}, the "
            f"execution {execution.get('status')} {execution.get('error')}",
        )

    def _late(self, event: Mapping[str, Any], before: Snapshot, snap: Snapshot) -> None:
        """A late delivery to a case that ended (or that a person resolved) is refused before
        anything is done: forward steps need the case under way, the release refuses a closed
        case (§5 item 1, §8), every tool refuses a resolved one (§3.10)."""
        tampered = event.get("tampered") or {}
        self.checks.check(
            "unapproved_parameters_refused",
            all(answer == APPROVAL_ERROR for answer in tampered.values()),
            f"{snap.label}: deliveries with a refund amount nobody approved answered {tampered}",
        )
        record = before.case_record or {}
        expected: dict[str, str | None]
        if record.get("resolution"):
            expected = dict.fromkeys(event.get("answers") or {}, SETTLED_ERROR)
        elif record.get("outcome") in ("COMPLETED", "ESCALATED"):
            expected = {
                state: "ReservationNotHeld" if state == RELEASE_STATE else "AuthorizationDenied"
                for state in event.get("answers") or {}
            }
            shipped = (before.ledger.get("ship") or {}).get("status") == "COMPLETED"
            if record.get("outcome") == "COMPLETED" and shipped and COMPLETING_STATE in expected:
                # The step that completed the case answers its recorded shipment, sending
                # nothing (§3.11); past the record's retention it is refused like the others.
                expected[COMPLETING_STATE] = None
        else:
            return  # a case under way: a late delivery is one more delivery of its execution
        self.checks.check(
            "closed_case_never_acts",
            event.get("answers") == expected and _same(before, snap),
            f"{snap.label}: late deliveries to a {record.get('outcome')} case (resolved "
            f"{bool(record.get('resolution'))}) answered {event.get('answers')}, expected "
            f"{expected}; changed {not _same(before, snap)}",
        )

    def _never_acts_again(self) -> None:
        assert self.resolved_at is not None
        resolved = self.run.snapshots[self.resolved_at]
        for snap in self.run.snapshots[self.resolved_at + 1 :]:
            # a closed record may expire after the decision too (its retention, §3.7)
            ledger = {
                op: r
                for op, r in resolved.ledger.items()
                if op in snap.ledger or not _expired_by(r, snap.clock)
            }
            for op, record in snap.ledger.items():
                if (
                    op in ledger
                    and record != ledger[op]
                    and _outcome_after_settlement(ledger[op], record)
                    and self.allowed(
                        "resolved_case_never_acts",
                        "outcome-after-settlement",
                        snap,
                        op,
                        f"{snap.label}: {op} was {ledger[op].get('status')} when settled, its "
                        f"delivery wrote {record.get('status')} after the decision",
                    )
                ):
                    ledger[op] = record
            self.checks.check(
                "resolved_case_never_acts",
                _effects(snap) == _effects(resolved)
                and snap.ledger == ledger
                and snap.case_record == resolved.case_record,
                f"{snap.label}: the case changed after its resolution (effects "
                f"{_effects(snap) != _effects(resolved)}, ledger {snap.ledger != ledger}, case "
                f"record {snap.case_record != resolved.case_record})",
            )
        resolve = next(e for e in self.run.operator if e.get("snapshot") == self.resolved_at)
        after = [
            m
            for m in self.run.messages[resolve["messages_to"] :]
            if m.get("kind") in NEEDS_A_PERSON and self._of_case(m)
        ]
        self.checks.check(
            "resolved_case_never_acts",
            not after,
            f"after the resolution, messages {[m.get('kind') for m in after]}",
        )

    def _messages(self, event: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
        window = self.run.messages[event["messages_from"] : event["messages_to"]]
        return [m for m in window if m.get("kind") == kind and self._of_case(m)]

    def _of_case(self, message: Mapping[str, Any]) -> bool:
        """A message about the case's own execution or actions (a rejected resubmission with
        other parameters is another request: its message is its own)."""
        return message.get("execution") == self.run.owner_arn or (
            f"#{self.run.plan.case_id}." in str(message.get("action_key", ""))
        )
