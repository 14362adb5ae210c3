"""The campaign's daily refund ceiling (docs/invariants.md, "The daily refund ceiling"): the
log of claims a case's snapshots give, the counters held to it, and when a REFUND_LIMIT_REACHED
escalation is honest. Built on made-up snapshots: each check must flag the state it names."""

from __future__ import annotations

from typing import Any

import pytest

from fault_campaign import generator
from fault_campaign.approval import CEILING_TENANT, CEILINGS, comparable
from fault_campaign.generator import generate
from fault_campaign.invariants import check_case
from fault_campaign.observe import Snapshot
from fault_campaign.plan_evidence import LEDGER_RETENTION_SECONDS, Evidence, ceiling_reached
from fault_campaign.runner import CaseRun, refund_claims
from saga.ceilings import counter_expires_at, counter_key

DAY = "2026-12-08"
CLOCK = 1_796_688_000.0  # 2026-12-08T00:00:00Z
KEY = counter_key(CEILING_TENANT, "USD", DAY)


def _case(amount: int = 4000) -> dict[str, Any]:
    plan = generate(1, 0, block_size=10)
    case = dict(plan.case)
    case["case_id"] = "c1"
    case["tenant_id"] = CEILING_TENANT
    case["refund"] = {**case["refund"], "currency": "USD", "amount_minor": amount}
    case.pop("sandbox", None)
    return case


def _record(status: str, error: str | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "action_key": "vandelay#refund#c1.refund",
        "status": status,
        "attempts": 1,
        "charged_day": DAY,
        "charged_minor": 4000,
        **extra,
    }
    if error is not None:
        record["error"] = {"type": error, "message": "..."}
    return record


def _snap(
    ledger: dict[str, Any], counters: dict[str, int], clock: float = CLOCK, label: str = "closed"
) -> Snapshot:
    return Snapshot(
        label=label,
        clock=clock,
        ledger=ledger,
        case_record=None,
        refunds=[],
        shipments=[],
        reservations=[],
        executions={},
        counters={key: {"counter_key": key, "total": total} for key, total in counters.items()},
    )


def _violations(case: dict[str, Any], snaps: list[Snapshot], before: dict[str, int]) -> set[str]:
    plan = generate(1, 0, block_size=10)
    plan.case = case
    run = CaseRun(plan=plan, stock_before=None, stock_after=None, snapshots=snaps)
    run.counters_before = before
    checks = check_case(run, budget=8)
    return {v["invariant"] for v in checks.violations if "ceiling" in v["invariant"]}


def test_the_log_counts_a_charge_until_the_providers_refusal_gives_it_back() -> None:
    case = _case()
    completed = _snap({"refund": _record("COMPLETED")}, {})
    assert refund_claims(case, [completed]) == {KEY: 4000}
    refused = _snap({"refund": _record("FAILED", "RefundRejected")}, {})
    assert refund_claims(case, [completed, refused]) == {}
    # A person's decision met the rejection's write: nothing was given back (§3.10, §3.12).
    settled = _snap({"refund": _record("FAILED", "RefundRejected", resolution={"by": "ada"})}, {})
    assert refund_claims(case, [settled]) == {KEY: 4000}
    # The record expired (TTL) after it was seen: its charge stays in the log.
    assert refund_claims(case, [completed, _snap({}, {})]) == {KEY: 4000}
    # A refusal by the ceiling charged nothing.
    limit = _record("FAILED", "RefundLimitReached")
    del limit["charged_day"], limit["charged_minor"]
    assert refund_claims(case, [_snap({"refund": limit}, {})]) == {}


def test_a_counter_that_equals_the_log_passes() -> None:
    snaps = [_snap({"refund": _record("COMPLETED")}, {KEY: 9000})]
    assert _violations(_case(), snaps, {KEY: 5000}) == set()


def test_a_counter_charged_twice_for_one_claim_is_a_violation() -> None:
    # What a takeover that charges again leaves: the record charged once, the counter twice.
    snaps = [_snap({"refund": _record("COMPLETED")}, {KEY: 8000})]
    assert _violations(_case(), snaps, {}) == {"ceiling_counter_agrees"}


def test_a_refusal_not_given_back_to_its_own_day_is_a_violation() -> None:
    snaps = [_snap({"refund": _record("FAILED", "RefundRejected")}, {KEY: 4000})]
    assert _violations(_case(), snaps, {}) == {"ceiling_counter_agrees"}


def test_a_counter_past_the_ceiling_is_a_violation_even_when_the_log_agrees() -> None:
    total = CEILINGS["USD"] + 1000
    snaps = [_snap({"refund": _record("COMPLETED")}, {KEY: total})]
    assert _violations(_case(), snaps, {KEY: total - 4000}) == {"ceiling_never_exceeded"}


def test_a_counter_may_be_gone_only_once_its_ttl_passed() -> None:
    ledger = {"refund": _record("COMPLETED")}
    assert _violations(_case(), [_snap(ledger, {})], {}) == {"ceiling_counter_agrees"}
    expired = float(counter_expires_at(DAY, LEDGER_RETENTION_SECONDS))
    assert _violations(_case(), [_snap(ledger, {}, clock=expired)], {}) == set()


def _evidence(limit: dict[str, Any], before: dict[str, int]) -> Evidence:
    plan = generate(1, 0, block_size=10)
    plan.case = _case(amount=4000)
    return Evidence(plan=plan, step="refund", limit=limit, counters_before=before)


@pytest.mark.parametrize(
    ("used_logged", "used_said", "honest"),
    [
        (7000, 7000, True),  # 7000 + 4000 > 10000
        (7000, 9000, False),  # the escalation's `used` is not what the log says
        (6000, 6000, False),  # 6000 + 4000 fits: the refusal had no reason
    ],
)
def test_a_limit_escalation_is_honest_only_with_the_logs_numbers(
    used_logged: int, used_said: int, honest: bool
) -> None:
    limit = {"ceiling": 10_000, "used": used_said, "asked": 4000, "currency": "USD", "day": DAY}
    assert ceiling_reached(_evidence(limit, {KEY: used_logged})) is honest


def test_ceiling_cases_leave_every_other_case_of_the_seed_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plans = [generate(20261, index, block_size=25) for index in range(120)]
    monkeypatch.setattr(generator, "CEILING_CHANCE", 0.0)
    without = [generate(20261, index, block_size=25) for index in range(120)]
    ceiling = [p for p in plans if p.case["tenant_id"] == CEILING_TENANT]
    assert ceiling, "no case of the ceiling tenant in 120"
    for plan, before in zip(plans, without, strict=True):
        if plan.case["tenant_id"] != CEILING_TENANT:
            assert comparable(plan.case) == comparable(before.case)
            assert plan.nemeses == before.nemeses and plan.redrives == before.redrives
    for plan in ceiling:
        refund = plan.case["refund"]
        limit = CEILINGS.get(refund["currency"], 0)
        refused = refund["amount_minor"] > limit
        assert (plan.expect_rejection == "AuthorizationDenied") is refused, plan.invalid
