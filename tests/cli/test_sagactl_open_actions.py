"""An open action is kept until a person decides (docs/design.md §3.7), on the local AWS's
movable clock: 60 days after each of the three kinds of open action appeared (twice the
ledger's 30-day retention, and DynamoDB's TTL deletion emulated), `sagactl stuck`, the sweeper's
`StuckActions` count and the worklist still have every one; the confirmed effects of the
escalated case are still shown; settling each takes it off all of them.

- UNKNOWN ship after carrier-unavailable (the case ESCALATED);
- an abandoned IN_PROGRESS claim (a delivery that took the refund over and died: its lease ran
  out with no outcome; the execution had stopped FAILED at IssueRefund);
- the UNKNOWN release of a compensation that did not finish (FAILED, COMPENSATION_PENDING).
"""

from __future__ import annotations

import contextlib
from typing import Any

from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from saga.identity import Operation, action_request
from saga.ledger import ActionLedger, Attempt, EffectResult, LedgerPolicy, Reconciliation
from saga.models import parse_case
from tests.cli.sagactl_helpers import Sagactl, get_item, run_example, saga, sagactl
from tests.e2e.test_saga_paths import load_example

__all__ = ["saga", "sagactl"]

DAY = 86400
CARRIER = "case-carrier-unavailable"
ABANDONED = "case-abandoned-refund"
COMPENSATION = "case-compensation-stuck"
SHIP_KEY = f"acme#ship#{CARRIER}.ship"
REFUND_KEY = f"acme#refund#{ABANDONED}.refund"
RELEASE_KEY = f"acme#release#{COMPENSATION}.reserve"
OPEN = {SHIP_KEY: "UNKNOWN", REFUND_KEY: "IN_PROGRESS", RELEASE_KEY: "UNKNOWN"}


class WorkerDied(BaseException):
    """The Lambda ran out of time mid-effect: nothing after the claim ran."""


def _die() -> EffectResult:
    raise WorkerDied


def _no_lookup() -> Reconciliation:
    raise AssertionError("a released lease is resumed without a lookup")


def _abandoned_refund(local: LocalAws) -> None:
    """IssueRefund's attempts all fail before sending (the execution stops FAILED, the refund's
    lease given back); then a late delivery takes the refund over and dies holding it."""
    case = load_example("happy-path")
    case["case_id"] = ABANDONED
    case["sandbox"] = {"faults": {"refund": ["fail_before_commit"] * 4}}
    case = sign_locally(case)
    description, _ = local.run_case(case)
    assert description["status"] == "FAILED"
    ledger = ActionLedger(
        local.outputs["LedgerTableName"], local.client("dynamodb"), LedgerPolicy()
    )
    request = action_request(parse_case(case), Operation.REFUND)
    with contextlib.suppress(WorkerDied):
        ledger.execute(request, Attempt("late-delivery", 30), effect=_die, reconcile=_no_lookup)


def _ledger(local: LocalAws, key: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = (
        local.client("dynamodb")
        .get_item(
            TableName=local.outputs["LedgerTableName"],
            Key={"action_key": {"S": key}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item


def _stuck(sagactl: Sagactl) -> dict[str, str]:
    listed = sagactl("stuck", "--json").json()["stuck"]
    return {action["action_key"]: action["status"] for action in listed}


def _worklist(sagactl: Sagactl) -> set[str]:
    return {e["case_id"] for e in sagactl("escalations", "--json").json()["escalations"]}


def test_every_kind_of_open_action_outlives_the_retention_until_a_person_settles_it(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    run_example(sagactl, saga, "carrier-unavailable")
    run_example(sagactl, saga, "compensation-stuck")
    _abandoned_refund(saga)
    refund_receipt = get_item(
        saga, "LedgerTableName", {"action_key": {"S": f"acme#refund#{CARRIER}.refund"}}
    )
    for key, status in OPEN.items():
        record = _ledger(saga, key)
        assert record is not None and record["status"]["S"] == status, key
        assert "expires_at" not in record, key  # open: no retention at all

    deleted = saga.clock.advance(60 * DAY).effects["ttl_deleted"]

    assert deleted.get(saga.outputs["LedgerTableName"], 0) >= 1  # closed records did expire
    assert _ledger(saga, f"acme#refund#{CARRIER}.refund") is None
    assert _stuck(sagactl) == OPEN
    assert _worklist(sagactl) == {CARRIER, ABANDONED, COMPENSATION}
    swept = sagactl("sweep", "--json").json()["report"]
    assert swept["stuck"] == 3  # what the StuckActions metric reports, exactly
    assert sorted(swept["action_keys"]) == sorted(OPEN)
    # The refund the escalated case made is still shown to the person deciding.
    shown = sagactl("escalations", "show", CARRIER, "--json").json()
    confirmed = {e["step"]: e for e in shown["confirmed_effects"]}
    assert set(confirmed) == {"reserve", "refund"}
    assert confirmed["refund"]["downstream_ref"] == refund_receipt["downstream_ref"]["S"]
    assert confirmed["refund"]["source"].startswith("execution")
    assert [a["action_key"] for a in shown["open_actions"]] == [SHIP_KEY]

    for case_id, key in ((CARRIER, SHIP_KEY), (ABANDONED, REFUND_KEY), (COMPENSATION, RELEASE_KEY)):
        resolved = sagactl(
            "escalations", "resolve", case_id, "--decision", "settled by hand", "--json"
        )
        assert resolved.code == 0, resolved.err
        assert key in resolved.json()["resolution"]["settled_actions"]
        assert key not in _stuck(sagactl) and case_id not in _worklist(sagactl)

    assert _stuck(sagactl) == {} and _worklist(sagactl) == set()
    assert sagactl("sweep", "--json").json()["report"]["stuck"] == 0
    saga.clock.advance(60 * DAY)  # a decision is never deleted either
    for key in OPEN:
        record = _ledger(saga, key)
        assert record is not None and "resolution" in record and "expires_at" not in record


def test_keep_open_actions_removes_the_retention_the_previous_version_gave_open_records(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    """The one-off upgrade step: records open today lose their `expires_at` (read from the
    `open-actions` index); closed ones keep it; a dry run and a second run change nothing."""
    run_example(sagactl, saga, "carrier-unavailable")  # ship UNKNOWN, refund COMPLETED
    ddb = saga.client("dynamodb")
    table = saga.outputs["LedgerTableName"]
    refund_key = f"acme#refund#{CARRIER}.refund"
    expiry = {"N": str(int(saga.clock.now()) + 30 * DAY)}
    ddb.update_item(  # as the previous version left it: a retention on an open record
        TableName=table,
        Key={"action_key": {"S": SHIP_KEY}},
        UpdateExpression="SET expires_at = :at",
        ExpressionAttributeValues={":at": expiry},
    )
    closed = _ledger(saga, refund_key)
    assert closed is not None and "expires_at" in closed

    dry = sagactl("keep-open-actions", "--dry-run", "--json").json()
    assert (dry["open_records"], dry["retention_removed"]) == (1, [SHIP_KEY])
    ship = _ledger(saga, SHIP_KEY)
    assert ship is not None and ship["expires_at"] == expiry  # a dry run writes nothing

    kept = sagactl("keep-open-actions")
    assert kept.code == 0, kept.err
    assert "1 open action(s); kept 1 that still carried a retention" in kept.out
    ship = _ledger(saga, SHIP_KEY)
    assert ship is not None and "expires_at" not in ship
    assert ship["status"]["S"] == "UNKNOWN" and ship["open_status"]["S"] == "UNKNOWN"
    assert _ledger(saga, refund_key) == closed  # a closed record keeps its retention
    again = sagactl("keep-open-actions", "--json").json()
    assert (again["open_records"], again["retention_removed"]) == (1, [])
