"""What a case's plan holds, as the honesty table (fault_campaign.honesty) asks it: the
evidence an alternative is judged against, and predicates over it (a sandbox fault on the
step's downstream, a crash on its effect, an invoke error on its tool, a DynamoDB fault on its
tables, the stock before the case, the clock's jumps, a record's state where the design names
one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fault_campaign.paths import FORWARD_STATES, RELEASE_STATE, TOOL_OF_STATE
from fault_campaign.plan import CasePlan

_STATE_OF = {**FORWARD_STATES, "release": RELEASE_STATE}
# ledger operation -> (sandbox downstream, crash nemesis effect, tool, its own tables)
STEP_PARTS: Mapping[str, tuple[str, str, str, tuple[str, ...]]] = {
    operation: (downstream, downstream, TOOL_OF_STATE[_STATE_OF[operation]], tables)
    for operation, downstream, tables in (
        ("reserve", "reserve", ("inventory", "reservations")),
        ("refund", "refund", ("payments",)),
        ("ship", "shipment", ("shipments",)),
        ("release", "release", ("reservations", "inventory")),
    )
}
UNCERTAIN_FAULTS = ("lose_response", "timeout", "in_flight", "unavailable")
# The sandbox payment provider's key retention (cdk.json sandbox): a refund "not found" allows
# a re-attempt only inside it (docs/design.md §3.6).
PAYMENT_KEY_RETENTION_SECONDS = 86400
LEDGER_RETENTION_SECONDS = 30 * 86400


@dataclass(frozen=True)
class Evidence:
    """What an alternative is judged against: the plan, the stock before the case, the step
    concerned, and a snapshot's ledger where the design names a recorded condition."""

    plan: CasePlan
    step: str | None = None
    stock_before: int | None = None
    ledger: Mapping[str, Mapping[str, Any]] | None = None
    budget: int = 8
    # A REFUND_LIMIT_REACHED escalation's numbers ({ceiling, used, asked, currency, day}), and
    # the counters before the case as the campaign's log of claims says (runner.CaseRun).
    limit: Mapping[str, Any] | None = None
    counters_before: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Fault:
    name: str
    why: str
    present: Callable[[Evidence], bool]


def sandbox(names: Iterable[str], step: str | None = None) -> Callable[[Evidence], bool]:
    wanted = tuple(names)

    def present(evidence: Evidence) -> bool:
        downstream = STEP_PARTS[step or evidence.step or ""][0]
        return any(f in wanted for f in evidence.plan.faults.get(downstream, []))

    return present


def _planned(evidence: Evidence, kind: str) -> list[dict[str, Any]]:
    return [n for n in evidence.plan.nemeses if n.get("kind") == kind]


def crash(answer: str | None = None) -> Callable[[Evidence], bool]:
    def present(evidence: Evidence) -> bool:
        effect = STEP_PARTS[evidence.step or ""][1]
        return any(
            n.get("effect") == effect and answer in (None, n.get("answer"))
            for n in _planned(evidence, "crash")
        )

    return present


def invoke(tool: str | None = None, error: str | None = None) -> Callable[[Evidence], bool]:
    def present(evidence: Evidence) -> bool:
        name = tool or STEP_PARTS[evidence.step or ""][2]
        return any(
            n.get("tool") == name and error in (None, n.get("error"))
            for n in _planned(evidence, "invoke_error")
        )

    return present


def overlap(how: str) -> Callable[[Evidence], bool]:
    """The overlap nemesis in its form `how` at the step (fault_campaign.overlap)."""

    def present(evidence: Evidence) -> bool:
        return any(
            n.get("how") == how and n.get("step") == evidence.step
            for n in _planned(evidence, "overlap")
        )

    return present


def dynamodb(*tables: str, own: bool = False) -> Callable[[Evidence], bool]:
    def present(evidence: Evidence) -> bool:
        named = set(tables) | (set(STEP_PARTS[evidence.step or ""][3]) if own else set())
        return any(n.get("table") in named for n in _planned(evidence, "dynamodb"))

    return present


def jumps(evidence: Evidence) -> bool:
    return bool(_planned(evidence, "jump"))


def foreign(step: str | None = None) -> Callable[[Evidence], bool]:
    def present(evidence: Evidence) -> bool:
        operation = step or evidence.step
        return any(n.get("operation") == operation for n in _planned(evidence, "foreign_record"))

    return present


def stock_short(evidence: Evidence) -> bool:
    quantity = int(evidence.plan.case["reserve"]["quantity"])
    return evidence.stock_before is None or evidence.stock_before < quantity


def redrive_jump(seconds: int) -> Callable[[Evidence], bool]:
    return lambda evidence: (
        any(float(r.get("jump", 0)) >= seconds for r in evidence.plan.redrives)
        or (evidence.step == "refund" and _operator_jump(evidence) >= seconds)
    )


def _operator_jump(evidence: Evidence) -> float:
    operator = evidence.plan.operator or {}
    return float(operator.get("jump_days", 0)) * 86400 if "jump" in operator.get("steps", ()) else 0


def retention_passed(evidence: Evidence) -> bool:
    duplicate = evidence.plan.duplicate or {}
    jumps = [float(duplicate.get("jump", 0)), _operator_jump(evidence)]
    return sum(jumps) + sum(float(r.get("jump", 0)) for r in evidence.plan.redrives) >= (
        LEDGER_RETENTION_SECONDS
    )


def ship_may_have_shipped(evidence: Evidence) -> bool:
    ship = (evidence.ledger or {}).get("ship") or {}
    return ship.get("status") in ("COMPLETED", "IN_PROGRESS", "UNKNOWN")


def budget_spent(evidence: Evidence) -> bool:
    record = (evidence.ledger or {}).get(evidence.step or "") or {}
    return (
        bool(record)
        and max(int(record.get("attempts", 0)), int(record.get("reconcile_rounds", 0)))
        >= evidence.budget
    )


def ceiling_reached(evidence: Evidence) -> bool:
    """The refusal's numbers are the case's and the log's: the amount asked is the case's, the
    ceiling the tenant's for its currency, `used` what the account's earlier cases charged that
    day and did not give back, and the two together exceed the ceiling (docs/design.md §3.12)."""
    from fault_campaign.approval import campaign_ceilings
    from saga.ceilings import counter_key

    limit = evidence.limit or {}
    case = evidence.plan.case
    tenant, refund = str(case["tenant_id"]), case["refund"]
    ceiling = campaign_ceilings().get(tenant, {}).get(str(refund["currency"]))
    if ceiling is None or not isinstance(limit.get("used"), int):
        return False
    used = (evidence.counters_before or {}).get(
        counter_key(tenant, str(refund["currency"]), str(limit.get("day"))), 0
    )
    return (
        limit.get("asked") == refund["amount_minor"]
        and limit.get("currency") == refund["currency"]
        and limit.get("ceiling") == ceiling
        and limit["used"] == used
        and used + int(refund["amount_minor"]) > ceiling
    )
