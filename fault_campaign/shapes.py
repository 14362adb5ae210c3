"""Plan shapes aimed at the rarer terminal outcomes, and the operator's plans: drawn from a
stream of their own (`{seed}:shape:{index}`), so that adding one leaves every other draw of a
campaign as it was.

A shape replaces a case's random faults (or adds a nemesis) so that the fixed-seed slice reaches
every terminal outcome a few times (issue 24): a stuck compensation, a reconciliation that
cannot run, a refused refund, a key used before with other parameters (REJECTED_AFTER_EFFECTS,
or a blocked release), stock contention at the reservation (a conflict that must be retried,
never reported as OUT_OF_STOCK), an execution redriven past the ledger's retention (a fresh
claim after a record expired), a step whose every delivery fails before committing until its
lifetime attempt budget is spent (the next redrive must not dispatch), a release's transaction
that lands after the next delivery released the reservation (a second release of a reservation
no longer HELD), a person's decision that lands while a delivery's outcome write is still
held (the outcome after the settlement, §3.10), and the boundaries of issue 41: a refund
reconciled after the provider's key window closed (never RETRY), a record an earlier release
left open with a retention and a delivery took over (kept past that retention), and a case
decided while its execution was stopped at reconciliation (the redrive refused, quietly).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


def _stuck_compensation(rng: random.Random, faults: dict[str, list[str]]) -> None:
    """A rejection, then a release that keeps failing past its retries (4 deliveries): FAILED
    with the compensation pending."""
    faults[rng.choice(("refund", "shipment"))] = ["reject"]
    faults["release"] = rng.choice(
        (
            ["fail_before_commit"] * rng.randint(4, 6),
            ["timeout", "lose_response", "timeout", "fail_before_commit", "timeout"],
        )
    )


def _reconcile_fails(rng: random.Random, faults: dict[str, list[str]]) -> dict[str, Any]:
    """An uncertain step whose reconciliation Lambda cannot invoke past its retries."""
    faults[rng.choice(("refund", "shipment"))] = [rng.choice(("timeout", "lose_response"))]
    return {
        "kind": "invoke_error",
        "tool": "ReconcileAction",
        "error": rng.choice(("Lambda.ServiceException", "Lambda.TooManyRequestsException")),
        "skip": 0,
        "count": 4,
    }


_DAY = 86400


@dataclass
class Shaped:
    """What a shape adds to a plan: the nemeses it needs, and its redrive rounds (None: the
    plan's own)."""

    nemeses: list[dict[str, Any]] = field(default_factory=list)
    redrives: list[dict[str, Any]] | None = None
    operator: dict[str, Any] | None = None  # the person's plan (None: the plan's own)


def _old_execution(faults: dict[str, list[str]]) -> Shaped:
    """The refund is made and recorded, and every answer of IssueRefund is lost (the invoke
    fails after the function ran) through the first run and three redrives 13, 26 and 32 days
    after the start; the last redrive, the cause removed, meets no refund record (closed, it
    expired 30 days after its write, §3.7) in an execution older than the retention: its fresh
    claim must look the refund up first (§3.2), since the provider's idempotency key (24 h)
    no longer folds a second refund into the first."""
    faults.clear()
    lost = {
        "kind": "invoke_error",
        "tool": "IssueRefund",
        "error": "Lambda.ServiceException",
        "skip": 0,
        "count": 100,  # every delivery of the planned rounds; the final round disarms it
    }
    rounds = [{"jump": 13 * _DAY, "heal": False}, {"jump": 13 * _DAY, "heal": False}]
    return Shaped([lost], [*rounds, {"jump": 6 * _DAY, "heal": False}])


# The stack's lifetime attempt budget (cdk.json `ledger.attempt_budget`, the AttemptBudget
# output) and the Retry policy's deliveries per run of a step that fails before committing
# (`retry.tool`: MaxAttempts 3, so 4 deliveries).
ATTEMPT_BUDGET = 8
_DELIVERIES_PER_RUN = 4


def _budget_spent(rng: random.Random, faults: dict[str, list[str]]) -> Shaped:
    """The refund or the shipment fails before committing on every delivery of the first run
    and of one redrive: each delivery gives its lease back (§3.4), and the two runs spend the
    lifetime attempt budget (§3.2). The runner's last round removes the cause and redrives: its
    delivery finds the budget spent, so it must not dispatch (one lookup, nothing found:
    BudgetExhausted, and ReconcileStep escalates, §4). (The reservation is one transaction with
    its record: a failure before it commits leaves no record, so it spends no attempt.)"""
    faults.clear()
    downstream = rng.choice(("refund", "shipment"))
    faults[downstream] = ["fail_before_commit"] * ATTEMPT_BUDGET
    rounds = ATTEMPT_BUDGET // _DELIVERIES_PER_RUN - 1
    return Shaped(redrives=[{"jump": 60, "heal": False}] * rounds)


def _decided_while_held(rng: random.Random, faults: dict[str, list[str]]) -> Shaped:
    """A delivery's answer is lost after its effect and its outcome write held (the overlap
    nemesis's `stale` form) while no reconcile tool invoke gets through: the case escalates with
    the action IN_PROGRESS under that delivery. A person finds it past its lease (31 days on)
    and resolves the case; only then does the held write land: it must keep the decision, no
    retention and not back among the open actions (§3.10)."""
    faults.clear()
    step = rng.choice(("refund", "ship"))
    error = rng.choice(("Lambda.ServiceException", "Lambda.TooManyRequestsException"))
    unreconciled = {"kind": "invoke_error", "tool": "ReconcileAction", "error": error}
    return Shaped(
        [
            {**unreconciled, "skip": 0, "count": 4},
            {"kind": "overlap", "how": "stale", "step": step, "at": "outcome", "until": "released"},
        ],
        operator={
            "at": "closed",
            "steps": ["jump", "resolve", "release", "sweep", "redrive:plain"],
            "jump_days": 31,
        },
    )


def shape(rng: random.Random, faults: dict[str, list[str]], sku: str) -> Shaped:
    """Sometimes replace the random faults by a shape that reaches a rarer outcome."""
    roll = rng.random()
    if roll < 0.04:
        faults.clear()
        _stuck_compensation(rng, faults)
    elif roll < 0.07:
        faults.clear()
        return Shaped([_reconcile_fails(rng, faults)])
    elif roll < 0.10:
        faults.clear()
        faults["refund"] = ["reject"]
    elif roll < 0.14:
        operation = rng.choice(("reserve", "refund", "ship", "release"))
        if operation == "release":
            faults.setdefault("shipment", []).insert(0, "reject")
        return Shaped([{"kind": "foreign_record", "operation": operation}])
    elif roll < 0.17:
        return Shaped([_stock_contention(rng, sku)])
    elif roll < 0.20:
        return _old_execution(faults)
    else:
        return _past_the_first_shapes(rng, roll, faults)
    return Shaped()


def _past_the_first_shapes(rng: random.Random, roll: float, faults: dict[str, list[str]]) -> Shaped:
    """The shapes drawn at 0.20 and above, each in a range of its own."""
    if roll < 0.215:
        return _budget_spent(rng, faults)
    if 0.23 <= roll < 0.26:
        faults.clear()
        faults[rng.choice(("refund", "shipment"))] = ["reject"]
        return Shaped([_delayed_release()])
    if 0.26 <= roll < 0.275:
        return _decided_while_held(rng, faults)
    if 0.275 <= roll < 0.285:
        return _reconciled_past_the_key_window(faults)
    if 0.285 <= roll < 0.295:
        return _legacy_retention_taken_over(faults)
    if 0.295 <= roll < 0.305:
        return _decided_at_reconciliation(faults)
    return Shaped()


# The payment provider's key retention (cdk.json `payment_key_retention_hours`), and the Retry
# policy's deliveries per run of a step whose invoke fails (`retry.tool`).
_KEY_WINDOW_SECONDS = 24 * 3600


def _reconciled_past_the_key_window(faults: dict[str, list[str]]) -> Shaped:
    """The refund's request times out (the provider got nothing; its caller cannot know) and
    every answer of IssueRefund's first run is lost after the function ran, each later
    delivery's lookup timing out too: FAILED with the refund UNKNOWN, a possible dispatch. The
    redrive comes a day and an hour later, the cause removed: the provider has forgotten the
    refund's key, so a lookup that finds nothing allows no re-attempt (§3.6). IssueRefund
    refuses to send, and the reconcile tool, wired with the provider's key window, must answer
    ESCALATE, never RETRY (issue 41, item 1)."""
    faults.clear()
    faults["refund"] = ["timeout"] * _DELIVERIES_PER_RUN
    lost = {
        "kind": "invoke_error",
        "tool": "IssueRefund",
        "error": "Lambda.ServiceException",
        "skip": 0,
        "count": _DELIVERIES_PER_RUN,
    }
    return Shaped([lost], [{"jump": _KEY_WINDOW_SECONDS + 3600, "heal": True}])


def _delayed_release() -> dict[str, Any]:
    """A rejection, then a release whose transaction is delayed on the network past its
    delivery's lease: the next delivery takes the release over, finds the reservation HELD and
    releases it, and only then the first transaction lands (fault_campaign.overlap,
    `delayed`). The stock must come back once (§5.1)."""
    return {"kind": "overlap", "how": "delayed", "step": "release", "at": "dispatch"}


def _stock_contention(rng: random.Random, sku: str) -> dict[str, Any]:
    """Other transactions hold the SKU's stock item as the reservation commits: DynamoDB
    cancels it with a TransactionConflict on that item (nothing applied, retried)."""
    return {
        "kind": "dynamodb",
        "table": "inventory",
        "operation": "TransactWriteItems",
        "error": "conflict",
        "match": sku,
        "skip": 0,
        "count": rng.randint(1, 3),
    }


_OPERATOR_STEPS: tuple[tuple[str, ...], ...] = (
    ("sweep", "resolve", "redrive:plain", "late"),
    ("jump", "sweep", "late"),
    ("sweep", "jump", "resolve", "redrive:sagactl", "sweep"),
    ("resolve", "redrive:plain"),
    ("late", "jump", "late"),
)


def operator(rng: random.Random) -> dict[str, Any] | None:
    """A person at work on some cases: at the first close (before any redrive) or at the end."""
    if rng.random() >= 0.15:
        return None
    return {
        "at": rng.choice(("closed", "end", "end")),
        "steps": list(rng.choice(_OPERATOR_STEPS)),
        "jump_days": rng.choice((31, 31, 45, 60)),
    }


def _legacy_retention_taken_over(faults: dict[str, list[str]]) -> Shaped:
    """Every delivery of the refund's first run fails before committing: FAILED, the record
    open with its lease given back. The record is then as the release before the open-record
    rule (§3.7) left open records, with a retention (`legacy_retention`). The redrive's
    delivery takes the record over, refunds and dies before recording it (a crash), and no
    reconcile invoke gets through (throttled before it ran): the case escalates with the record
    still open under the dead delivery. A person looks 31 days on, past that retention: the
    record must still be there, since the takeover removed the retention (issue 41, item 3)."""
    faults.clear()
    faults["refund"] = ["fail_before_commit"] * _DELIVERIES_PER_RUN
    return Shaped(
        [
            {"kind": "legacy_retention", "operation": "refund"},
            {"kind": "crash", "effect": "refund", "nth": 1, "answer": "exited", "jump": 60},
            {
                "kind": "invoke_error",
                "tool": "ReconcileAction",
                "error": "Lambda.TooManyRequestsException",
                "skip": 0,
                "count": _DELIVERIES_PER_RUN,
            },
        ],
        [{"jump": 60, "heal": False}],
        operator={"at": "end", "steps": ["jump"], "jump_days": 31},
    )


def _decided_at_reconciliation(faults: dict[str, list[str]]) -> Shaped:
    """The refund's request times out, and a person stops the execution while ReconcileStep's
    invoke is in flight (the overlap nemesis's `abort` at `reconcile`): the case is open (the
    execution stopped, nothing held), the person resolves it, and the execution is redriven into
    ReconcileStep, which meets the decision. It must end FAILED with the error the
    failed-execution rule excludes (ActionSettled): refused, nothing queued (issue 41, item 6)."""
    faults.clear()
    faults["refund"] = ["timeout"]
    return Shaped(
        [{"kind": "overlap", "how": "abort", "step": "refund", "at": "reconcile", "resolve": True}]
    )
