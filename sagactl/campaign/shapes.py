"""Plan shapes aimed at the rarer terminal outcomes, and the operator's plans: drawn from a
stream of their own (`{seed}:shape:{index}`), so that adding one leaves every other draw of a
campaign as it was.

A shape replaces a case's random faults (or adds a nemesis) so that the fixed-seed slice reaches
every terminal outcome a few times (issue 24): a stuck compensation, a reconciliation that
cannot run, a refused refund, a key used before with other parameters (REJECTED_AFTER_EFFECTS,
or a blocked release), and stock contention at the reservation (a conflict that must be retried,
never reported as OUT_OF_STOCK).
"""

from __future__ import annotations

import random
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


def shape(rng: random.Random, faults: dict[str, list[str]], sku: str) -> list[dict[str, Any]]:
    """Sometimes replace the random faults by a shape that reaches a rarer outcome; the
    nemeses it needs."""
    roll = rng.random()
    if roll < 0.04:
        faults.clear()
        _stuck_compensation(rng, faults)
    elif roll < 0.07:
        faults.clear()
        return [_reconcile_fails(rng, faults)]
    elif roll < 0.10:
        faults.clear()
        faults["refund"] = ["reject"]
    elif roll < 0.14:
        operation = rng.choice(("reserve", "refund", "ship", "release"))
        if operation == "release":
            faults.setdefault("shipment", []).insert(0, "reject")
        return [{"kind": "foreign_record", "operation": operation}]
    elif roll < 0.17:
        return [_stock_contention(rng, sku)]
    return []


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
