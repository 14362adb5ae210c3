"""The oracle can fail: each planted bug of issue 24, as the snapshot it leaves, is a violation
of the invariant named for it, and the honest state next to it is not. docs/invariants.md stays
the table the checks ask (fault_campaign.honesty)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from fault_campaign.generator import generate
from fault_campaign.honesty import printed, render
from fault_campaign.invariants import check_case
from fault_campaign.observe import Snapshot
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun

ROOT = Path(__file__).resolve().parents[2]
OWNER = "arn:aws:states:us-east-1:123456789012:execution:sm:c1"
KEYS = {
    op: f"acme#{op}#c1.{'reserve' if op == 'release' else op}"
    for op in ("reserve", "refund", "ship", "release")
}
QUANTITY = 2


def _plan(faults: dict[str, list[str]] | None = None, **fields: Any) -> CasePlan:
    plan = generate(1, 0, block_size=10)
    plan.case["case_id"] = "c1"
    plan.case["tenant_id"] = "acme"
    plan.case["reserve"] = {"sku": "CMP-A", "quantity": QUANTITY}
    plan.case.pop("sandbox", None)
    if faults:
        plan.case["sandbox"] = {"faults": faults}
    plan.nemeses, plan.duplicate, plan.redrives, plan.operator = [], None, [], None
    for name, value in fields.items():
        setattr(plan, name, value)
    return plan


def _record(op: str, status: str, **fields: Any) -> dict[str, Any]:
    return {"action_key": KEYS[op], "case_id": "c1", "status": status, "attempts": 1, **fields}


def _step(op: str, ref: str) -> dict[str, Any]:
    return {"action_key": KEYS[op], "downstream_ref": ref}


def _escalated(output: dict[str, Any], tasks: list[str]) -> dict[str, Any]:
    """The owner's execution, SUCCEEDED with `output`, having delivered to `tasks`."""
    return {
        "arn": OWNER,
        "name": "c1",
        "status": "SUCCEEDED",
        "output": output,
        "path": ["ValidateCase", *tasks],
        "scheduled_states": ["ValidateCase", *tasks],
        "last_state": "RecordOutcome",
        "error": None,
    }


def _shipment_rejected(*, blocked: str | None = None) -> tuple[Snapshot, dict[str, Any]]:
    """SHIPMENT_REJECTED, honestly: the carrier refused, the reservation released (or, with
    `blocked`, the release refused and the reservation HELD)."""
    case = _plan().case
    steps = {"reserve": _step("reserve", KEYS["reserve"]), "refund": _step("refund", "re_1")}
    released = blocked is None
    escalation = {"reason": "SHIPMENT_REJECTED", "step": "ship"}
    if blocked:
        escalation["compensation_blocked"] = blocked
    compensations = [_step("release", KEYS["reserve"])] if released else []
    output = {
        "outcome": "ESCALATED",
        "steps": steps,
        "compensations": compensations,
        "escalation": escalation,
    }
    ledger = {
        "reserve": _record("reserve", "COMPLETED", downstream_ref=KEYS["reserve"]),
        "refund": _record("refund", "COMPLETED", downstream_ref="re_1"),
        "ship": _record("ship", "FAILED", error={"type": "ShipmentRejected", "message": "no"}),
    }
    if released:
        ledger["release"] = _record("release", "COMPLETED", downstream_ref=KEYS["reserve"])
    reservation = {
        "reservation_id": KEYS["reserve"],
        "case_id": "c1",
        "sku": "CMP-A",
        "quantity": QUANTITY,
        "status": "RELEASED" if released else "HELD",
        **({"released_by": KEYS["release"]} if released else {}),
    }
    snap = Snapshot(
        label="closed",
        clock=1000.0,
        ledger=ledger,
        case_record={
            "case_id": "c1",
            "outcome": "ESCALATED",
            "execution_arn": OWNER,
            "escalation": escalation,
            "steps": steps,
        },
        refunds=[{"refund_id": "re_1", "case_id": "c1", **case["refund"]}],
        shipments=[],
        reservations=[reservation],
        executions={OWNER: _escalated(output, ["ReserveStock", "IssueRefund", "CreateShipment"])},
        stock=10 if released else 10 - QUANTITY,
    )
    message = {
        "kind": "CASE_ESCALATED",
        "case_id": "c1",
        "execution": OWNER,
        "reason": "SHIPMENT_REJECTED",
        "step": "ship",
        "confirmed_effects": list(steps.values()),
        "compensated": KEYS["release"] if released else None,
        "compensation_blocked": blocked,
    }
    return snap, message


def _violations(plan: CasePlan, snap: Snapshot, messages: list[dict[str, Any]]) -> set[str]:
    run = CaseRun(plan=plan, stock_before=10, stock_after=snap.stock, snapshots=[snap])
    run.owner_arn = OWNER
    run.messages = messages
    return {v["invariant"] for v in check_case(run, budget=8).violations}


def test_an_honest_shipment_rejection_passes_every_check() -> None:
    snap, message = _shipment_rejected()
    assert _violations(_plan({"shipment": ["reject"]}), snap, [message]) == set()


def test_a_case_whose_only_fault_is_an_overlap_must_complete() -> None:
    """Two deliveries of one action in flight at once (fault_campaign/overlap.py) make no
    alternative honest: a case with stock, no sandbox fault and only an overlap that fired
    ends COMPLETED (here it escalated SHIPMENT_REJECTED with no carrier refusing)."""
    snap, message = _shipment_rejected()
    plan = _plan(nemeses=[{"kind": "overlap", "how": "hang", "step": "ship", "at": "claim"}])
    run = CaseRun(plan=plan, stock_before=10, stock_after=snap.stock, snapshots=[snap])
    run.owner_arn, run.messages = OWNER, [message]
    run.fired = ["overlap:hang:ship:claim"]
    assert "clean_case_completes" in {v["invariant"] for v in check_case(run, budget=8).violations}
    run.fired = ["overlap:stale:ship", "dynamodb:internal_after:shipments:TransactWriteItems"]
    plan.nemeses = [{"kind": "overlap", "how": "stale", "step": "ship", "at": "outcome"}]
    assert "clean_case_completes" in {v["invariant"] for v in check_case(run, budget=8).violations}
    run.fired = ["overlap:hang:ship:claim", "jump:60s"]  # another fault fired: judged by it
    plan.nemeses = [{"kind": "overlap", "how": "hang", "step": "ship", "at": "claim"}]
    assert "clean_case_completes" not in {
        v["invariant"] for v in check_case(run, budget=8).violations
    }


def test_a_rejected_shipment_that_blocks_the_release_is_a_violation() -> None:
    """Planted bug 1: the release refused because the ship record is FAILED. "Blocked" is
    honest only where the shipment may have happened, or the plan refuses the release."""
    snap, message = _shipment_rejected(blocked="the shipment action is FAILED")
    assert "compensated_or_said_so" in _violations(_plan({"shipment": ["reject"]}), snap, [message])
    honest = _plan({"shipment": ["reject"], "release": ["reject"]})
    assert "compensated_or_said_so" not in _violations(honest, snap, [message])


def test_a_release_while_the_shipment_may_have_happened_is_a_violation() -> None:
    """§5.1 (mutant release-after-uncertain-ship): a shipment record open or UNKNOWN, this
    case's or another request's under the key (the `foreign_record` nemesis), may have consumed
    the stock; a release then returns stock that may be in a parcel."""
    snap, message = _shipment_rejected()
    plan = _plan({"shipment": ["reject"]})
    assert "release_only_if_nothing_shipped" not in _violations(plan, snap, [message])
    for status in ("IN_PROGRESS", "UNKNOWN"):
        snap.ledger["ship"] = _record("ship", status, request_digest="sha256:another")
        assert "release_only_if_nothing_shipped" in _violations(plan, snap, [message])


def test_an_escalation_message_that_hides_the_compensation_is_a_violation() -> None:
    """Planted bug 3: the message says nothing was compensated."""
    snap, message = _shipment_rejected()
    assert "queue_agrees" in _violations(
        _plan({"shipment": ["reject"]}), snap, [{**message, "compensated": []}]
    )


def test_a_rejection_no_planned_fault_explains_is_a_violation() -> None:
    snap, message = _shipment_rejected()
    assert "escalation_honest" in _violations(_plan(), snap, [message])


def _uncertain_refund(refund_status: str) -> tuple[Snapshot, dict[str, Any]]:
    snap, message = _shipment_rejected()
    escalation = {"reason": "OUTCOME_UNCERTAIN", "step": "refund"}
    steps = {"reserve": _step("reserve", KEYS["reserve"])}
    output = {"outcome": "ESCALATED", "steps": steps, "compensations": [], "escalation": escalation}
    snap.executions[OWNER]["output"] = output
    snap.case_record = {**(snap.case_record or {}), "escalation": escalation, "steps": steps}
    snap.ledger = {
        "reserve": snap.ledger["reserve"],
        "refund": _record("refund", refund_status, escalated_at=900.0, first_dispatch_at=800.0),
    }
    if refund_status == "COMPLETED":
        snap.ledger["refund"]["downstream_ref"] = "re_1"
    snap.reservations[0] = {
        **{k: v for k, v in snap.reservations[0].items() if k != "released_by"},
        "status": "HELD",
    }
    snap.stock = 10 - QUANTITY
    message = {
        **message,
        "reason": "OUTCOME_UNCERTAIN",
        "step": "refund",
        "confirmed_effects": steps["reserve"],
        "compensated": None,
    }
    return snap, message


def test_an_uncertain_outcome_is_honest_only_with_an_open_record_and_a_fault() -> None:
    """Planted bug 2: reconciliation found the refund (COMPLETED) and still escalated it as
    uncertain. The record must be open, and the plan must hold a fault that makes it so."""
    planned = _plan({"refund": ["lose_response"]})
    snap, message = _uncertain_refund("UNKNOWN")
    assert _violations(planned, snap, [message]) == set()
    assert "escalation_honest" in _violations(_plan(), snap, [message])
    found, message = _uncertain_refund("COMPLETED")
    assert {"uncertain_is_open", "confirmed_effects_reported"} <= _violations(
        planned, found, [message]
    )


def test_out_of_stock_with_the_stock_there_is_a_violation() -> None:
    """The fifth: a transaction conflict reported as OUT_OF_STOCK. The stock before the case
    covers the quantity and no planned fault refuses the reservation."""
    plan = _plan()
    escalation = {"reason": "OUT_OF_STOCK", "step": "reserve"}
    output = {"outcome": "ESCALATED", "steps": {}, "compensations": [], "escalation": escalation}
    snap = Snapshot(
        label="closed",
        clock=1000.0,
        ledger={"reserve": _record("reserve", "FAILED", error={"type": "OutOfStock"})},
        case_record={
            "case_id": "c1",
            "outcome": "ESCALATED",
            "execution_arn": OWNER,
            "escalation": escalation,
            "steps": {},
        },
        refunds=[],
        shipments=[],
        reservations=[],
        executions={OWNER: _escalated(output, ["ReserveStock"])},
        stock=10,
    )
    message = {
        "kind": "CASE_ESCALATED",
        "case_id": "c1",
        "execution": OWNER,
        "reason": "OUT_OF_STOCK",
        "step": "reserve",
    }
    assert "escalation_honest" in _violations(plan, snap, [message])
    short = copy.deepcopy(plan)
    short.case["reserve"]["quantity"] = 11  # more than the 10 in stock before the case
    assert _violations(short, snap, [message]) == set()


def test_a_pending_compensation_with_an_unmarked_case_record_is_a_violation() -> None:
    """Planted bug 4: the release ran (its record exists) and the case record still says
    IN_PROGRESS: the mark comes before anything else."""
    snap, _ = _shipment_rejected(blocked=None)
    snap.ledger["release"] = _record("release", "IN_PROGRESS", first_dispatch_at=900.0)
    failed = {
        "arn": OWNER,
        "name": "c1",
        "status": "FAILED",
        "output": None,
        "error": "OutcomeUnknown",
        "path": ["ValidateCase", "ReserveStock", "CreateShipment", "ReleaseReservation"],
        "scheduled_states": ["ReleaseReservation"] * 4,
        "last_state": "ReleaseReservation",
        "last_run_deliveries": 4,
    }
    snap.executions = {OWNER: failed}
    snap.reservations[0] = {
        **{k: v for k, v in snap.reservations[0].items() if k != "released_by"},
        "status": "HELD",
    }
    snap.stock = 10 - QUANTITY
    snap.case_record = {"case_id": "c1", "outcome": "IN_PROGRESS", "execution_arn": OWNER}
    plan = _plan({"shipment": ["reject"], "release": ["timeout"] * 4})
    pending = {"kind": "EXECUTION_NOT_SUCCEEDED", "execution": OWNER}
    assert "case_record_agrees" in _violations(plan, snap, [pending])
    snap.case_record["outcome"] = "COMPENSATION_PENDING"
    assert _violations(plan, snap, [pending]) == set()


def test_an_effect_whose_open_record_vanished_is_a_violation() -> None:
    """An open record never expires (§3.7): one that disappears, with its effect still there,
    is not excused by a retention."""
    snap, message = _shipment_rejected()
    later = copy.deepcopy(snap)
    later.label, later.clock = "later", 10_000_000.0
    del later.ledger["refund"]
    snap.ledger["refund"] = _record("refund", "UNKNOWN", first_dispatch_at=900.0)
    plan = _plan({"shipment": ["reject"], "refund": ["lose_response"]})
    run = CaseRun(plan=plan, stock_before=10, stock_after=10, snapshots=[snap, later])
    run.owner_arn, run.messages = OWNER, [message]
    found = {v["invariant"] for v in check_case(run, budget=8).violations}
    assert {"open_record_kept", "effect_recorded"} <= found


def test_docs_invariants_prints_the_table_the_checks_ask() -> None:
    """`python -m fault_campaign allowances --write docs/invariants.md` prints it again."""
    text = (ROOT / "docs" / "invariants.md").read_text(encoding="utf-8")
    assert printed(text) == render()


def test_a_release_that_landed_after_its_delivery_gave_up_is_honest_only_when_delayed() -> None:
    """The overlap nemesis's `delayed` form holds the release's transaction on the network past
    its delivery's lease: it may land after that delivery recorded UNKNOWN, so a released
    reservation with an open release record is honest with that fault planned, not without."""
    snap, message = _shipment_rejected()
    snap.ledger["release"] = _record("release", "UNKNOWN", owner="a", first_dispatch_at=990.0)
    delayed = {"kind": "overlap", "how": "delayed", "step": "release", "at": "dispatch"}
    faults = {"shipment": ["reject"]}
    assert "effect_recorded" not in _violations(_plan(faults, nemeses=[delayed]), snap, [message])
    assert "effect_recorded" in _violations(_plan(faults), snap, [message])
