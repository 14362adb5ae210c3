"""`sagactl escalations`: the worklist from the cases table, show, resolve, against the local AWS.

Three open cases of three kinds: shipment-rejected (ESCALATED after releasing the reservation),
compensation-stuck (execution FAILED at the release, case COMPENSATION_PENDING) and
carrier-unavailable (ESCALATED with the shipment UNKNOWN in the ledger). The happy path is not
open. The clock moves a minute between them so that "oldest first" is a fact, not a tie.
"""

from __future__ import annotations

import contextlib
import getpass
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from saga.dynamodb import to_item
from saga.identity import Operation, action_id_for
from saga.ledger import Absent, ActionLedger, ActionRequest, Attempt, LedgerPolicy
from sagactl.errors import AlreadyResolved
from sagactl.operations.escalations import open_escalations, resolve
from sagactl.target import local_target_from_outputs
from sagactl.views.escalations import ResolveReport
from tests.cli.sagactl_helpers import (
    Sagactl,
    example,
    get_item,
    run_example,
    saga,
    sagactl,
    scan,
)
from tests.cli.test_awscli import aws_run

__all__ = ["saga", "sagactl"]

SHIPMENT_REJECTED = "case-shipment-rejected"
COMPENSATION_STUCK = "case-compensation-stuck"
CARRIER_UNAVAILABLE = "case-carrier-unavailable"
ORDER = [SHIPMENT_REJECTED, COMPENSATION_STUCK, CARRIER_UNAVAILABLE]  # as started, a minute apart
SHIP_KEY = "acme#ship#case-carrier-unavailable.ship"
RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"
SKU = "SKU-RED-MUG"
GRACE_PASSED = 10 * 60  # past cdk.json monitoring.stuck_grace_seconds (300)


@pytest.fixture
def three_open(saga: LocalAws, sagactl: Sagactl) -> Iterator[LocalAws]:
    for name in ("shipment-rejected", "compensation-stuck", "carrier-unavailable"):
        run_example(sagactl, saga, name)
        saga.clock.advance(60)
    run_example(sagactl, saga, "happy-path")
    yield saga


# --- reading the account -------------------------------------------------------------------------
def case_record(local: LocalAws, case_id: str) -> dict[str, Any]:
    return get_item(local, "CasesTableName", {"case_id": {"S": case_id}})


def ledger_item(local: LocalAws, key: str) -> dict[str, Any]:
    return get_item(local, "LedgerTableName", {"action_key": {"S": key}})


def receive_all(local: LocalAws) -> list[dict[str, Any]]:
    """Every message on the escalation queue, consumed (body + its receive count)."""
    sqs = local.client("sqs")
    url = local.outputs["EscalationQueueUrl"]
    found = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
    ).get("Messages"):
        for message in batch:
            found.append(
                {
                    **json.loads(message["Body"]),
                    "_receives": int(message["Attributes"]["ApproximateReceiveCount"]),
                }
            )
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def queue_depth(local: LocalAws, output: str = "EscalationQueueUrl") -> tuple[int, int]:
    """(visible, in flight) messages; the dead-letter queue is the other queue in the account."""
    sqs = local.client("sqs")
    attributes = sqs.get_queue_attributes(
        QueueUrl=local.outputs[output],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def stock(local: LocalAws) -> int:
    return next(
        int(item["available"]["N"])
        for item in scan(local, "InventoryTableName")
        if item["sku"]["S"] == SKU
    )


# --- the worklist --------------------------------------------------------------------------------
def test_the_worklist_lists_the_three_open_cases_oldest_first(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    result = sagactl("escalations", "--json")

    assert result.code == 0, result.err
    listed = result.json()["escalations"]
    assert [e["case_id"] for e in listed] == ORDER
    assert [e["since"] for e in listed] == sorted(e["since"] for e in listed)
    rejected, stuck, unavailable = listed
    assert (rejected["outcome"], rejected["reason"], rejected["step"]) == (
        "ESCALATED",
        "SHIPMENT_REJECTED",
        "ship",
    )
    assert rejected["decision_needed"].startswith("The reservation was released.")
    assert (stuck["outcome"], stuck["execution_status"], stuck["reason"]) == (
        "COMPENSATION_PENDING",
        "FAILED",
        "COMPENSATION_PENDING",
    )
    assert stuck["step"] == "release"
    assert stuck["detail"].startswith("FAILED at ReleaseReservation: OutcomeUnknown: ")
    # The redrive plan's own verdict: it can help, with the budget left.
    assert stuck["redrive"]["can_help"] is True
    [action] = stuck["redrive"]["plan"]["actions"]
    assert action["action_key"] == RELEASE_KEY and action["remaining_budget"] > 0
    assert (
        f"`sagactl redrive {COMPENSATION_STUCK}` reruns ReleaseReservation"
        in (stuck["decision_needed"])
    )
    assert (unavailable["reason"], unavailable["step"]) == ("OUTCOME_UNCERTAIN", "ship")
    assert (
        "confirm it with the downstream by business reference" in (unavailable["decision_needed"])
    )

    text = sagactl("escalations")
    assert text.code == 0, text.err
    assert text.out.startswith("3 open escalation(s), oldest first:\n")
    assert f"  {COMPENSATION_STUCK} (tenant acme): COMPENSATION_PENDING since " in text.out
    assert "    reason    SHIPMENT_REJECTED (step ship)" in text.out
    assert 'resolve one with: sagactl escalations resolve CASE --decision "..."' in text.out


def test_the_worklist_filters_by_tenant_and_reads_every_page(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    assert len(sagactl("escalations", "--tenant", "acme", "--json").json()["escalations"]) == 3
    other = sagactl("escalations", "--tenant", "globex")
    assert (other.code, other.out.strip()) == (0, "no open escalations for tenant globex")
    bad = sagactl("escalations", "--tenant", "Not A Tenant", "--json")
    assert bad.code == 2 and bad.json()["error"]["type"] == "UsageError"

    # Pages of one item: four case records take at least four Scan requests, all followed.
    target = local_target_from_outputs(three_open.outputs)
    scans = []
    target.client("dynamodb").meta.events.register(
        "before-call.dynamodb.Scan", lambda **_: scans.append(1)
    )
    paged = open_escalations(target, budget=8, page_size=1)
    assert [e.case_id for e in paged] == [
        SHIPMENT_REJECTED,
        COMPENSATION_STUCK,
        CARRIER_UNAVAILABLE,
    ]
    assert len(scans) >= 4


def test_the_worklist_says_which_queued_messages_belong_to_no_open_case_and_why(
    three_open: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    """A case ValidateCase rejected has no case record, so it is no open case; the
    failed-execution rule still queues a message for each of its stops (here two: the
    rejection, and a plain redrive that rejected it again). `escalations` counts them from
    the executions and says why they answer no open case, without receiving any message."""
    case = json.loads(example("lost-refund-response").read_text(encoding="utf-8"))
    case["refund"]["amount_minor"] += 1  # edited after the approval
    case_file = tmp_path / "tampered.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")
    assert sagactl("start", str(case_file), "--skip-checks", "--watch").code == 6
    arn = three_open.outputs["StateMachineArn"].replace(":stateMachine:", ":execution:")
    arn += ":case-lost-refund-response"
    redriven = aws_run(three_open, "stepfunctions", "redrive-execution", "--execution-arn", arn)
    assert redriven.returncode == 0, redriven.stderr
    assert three_open.wait_for_execution(arn)["redriveCount"] == 1

    result = sagactl("escalations", "--json")

    assert result.code == 0, result.err
    assert [e["case_id"] for e in result.json()["escalations"]] == ORDER  # still the worklist
    queue = result.json()["queue"]
    [stops] = queue["no_open_case"]["executions"]
    assert queue["no_open_case"]["messages"] == 2
    assert (stops["execution_name"], stops["messages"], stops["status"], stops["error"]) == (
        "case-lost-refund-response",
        2,
        "FAILED",
        "ApprovalMismatch",
    )
    assert stops["why"].startswith(
        "ValidateCase rejected case case-lost-refund-response (ApprovalMismatch: "
    )
    assert (
        "approve it as the next revision (`sagactl case approve FILE --revision 2`)"
        in (stops["why"])
    )
    text = sagactl("escalations")
    assert (
        f"escalation queue: {queue['depth']} message(s) waiting (all cases); in the last 14 "
        "day(s) (its retention) the failed-execution rule queued 2 for executions that belong "
        "to no open case, one per stop:"
    ) in text.out.splitlines()
    assert "  case-lost-refund-response: 2 message(s), FAILED: ValidateCase rejected case " in (
        text.out
    )
    assert sagactl("escalations", "--tenant", "globex").out.strip() == (
        "no open escalations for tenant globex"
    )
    # What the queue holds, read here (escalations never received: one receive each).
    messages = receive_all(three_open)
    assert len(messages) == queue["depth"]
    assert all(message["_receives"] == 1 for message in messages)
    unowned = [m for m in messages if m.get("case_id") not in ORDER]
    assert [(m["case_id"], m["error"]) for m in unowned] == [
        ("case-lost-refund-response", "ApprovalMismatch")
    ] * 2


# --- one case ------------------------------------------------------------------------------------
def test_show_has_everything_to_decide_and_receives_nothing_from_the_queue(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    three_open.clock.advance(GRACE_PASSED)
    assert sagactl("sweep").code == 0  # the stuck actions' messages join the others
    depth_before = queue_depth(three_open)

    for _ in range(6):  # more than maxReceiveCount: a receive each time would dead-letter them
        result = sagactl("escalations", "show", CARRIER_UNAVAILABLE, "--json")
        assert result.code == 0, result.err

    view = result.json()
    assert view["open"] is True and view["outcome"] == "ESCALATED"
    assert view["escalation"]["reason"] == "OUTCOME_UNCERTAIN"
    assert view["execution"]["status"] == "SUCCEEDED"
    assert [(e["step"], e["status"]) for e in view["confirmed_effects"]] == [
        ("reserve", "COMPLETED"),
        ("refund", "COMPLETED"),
    ]
    assert view["confirmed_effects"][1]["downstream_ref"].startswith("re_")
    assert view["compensations"] == []
    [ship] = view["open_actions"]
    assert (ship["action_key"], ship["status"], ship["resolution"]) == (SHIP_KEY, "UNKNOWN", None)
    assert ship["attempts"] >= 1 and ship["budget"] == 8
    assert ship["business_ref"] == "case-carrier-unavailable.ship"
    assert [(n["kind"], n.get("action_key")) for n in view["notifications"]] == [
        ("CASE_ESCALATED", None),
        ("STUCK_ACTION", SHIP_KEY),
    ]
    assert queue_depth(three_open) == depth_before  # nothing received, nothing in flight
    assert all(m["_receives"] == 1 for m in receive_all(three_open))  # this test's receive

    stuck = sagactl("escalations", "show", COMPENSATION_STUCK, "--json").json()
    assert [(n["kind"], n.get("count"), n.get("action_key")) for n in stuck["notifications"]] == [
        ("EXECUTION_NOT_SUCCEEDED", 1, None),
        ("STUCK_ACTION", None, RELEASE_KEY),
    ]
    assert [(a["step"], a["status"]) for a in stuck["compensations"]] == [("release", "UNKNOWN")]
    text = sagactl("escalations", "show", COMPENSATION_STUCK)
    assert text.code == 0, text.err
    assert "  status    FAILED" in text.out
    assert f"  release  {RELEASE_KEY}" in text.out
    assert "EXECUTION_NOT_SUCCEEDED" in text.out
    assert (
        f'resolve it with: sagactl escalations resolve {COMPENSATION_STUCK} --decision "..."'
        in (text.out)
    )


# --- resolve -------------------------------------------------------------------------------------
def test_resolve_records_the_decision_settles_the_unknown_and_removes_only_its_messages(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    three_open.clock.advance(GRACE_PASSED)
    assert sagactl("sweep", "--json").json()["report"]["action_keys"] == [RELEASE_KEY, SHIP_KEY]
    case_before = case_record(three_open, CARRIER_UNAVAILABLE)

    result = sagactl(
        "escalations",
        "resolve",
        CARRIER_UNAVAILABLE,
        "--decision",
        "carrier confirmed no shipment; shipped by hand as shp-manual-1",
        "--json",
    )

    assert result.code == 0, result.err
    report = result.json()
    resolution = report["resolution"]
    assert resolution["by"] == getpass.getuser()  # locally: the OS user
    # the open ship action, and the release that has no record: a SETTLED one now
    release = "acme#release#case-carrier-unavailable.reserve"
    assert resolution["settled_actions"] == [SHIP_KEY, release]
    assert report["queue"]["removed"] == 2  # its CASE_ESCALATED and its STUCK_ACTION
    # The case record: a separate resolution; the outcome and everything else as they were.
    case_after = case_record(three_open, CARRIER_UNAVAILABLE)
    assert json.loads(json.dumps(case_after["resolution"]["M"]["decision"])) == {
        "S": "carrier confirmed no shipment; shipped by hand as shp-manual-1"
    }
    assert {k: v for k, v in case_after.items() if k != "resolution"} == case_before
    # The ledger: UNKNOWN stays UNKNOWN, out of the sweeper's index, the decision on it.
    ship = ledger_item(three_open, SHIP_KEY)
    assert ship["status"]["S"] == "UNKNOWN"
    assert "open_status" not in ship
    assert ship["resolution"]["M"]["at"] == case_after["resolution"]["M"]["at"]
    sweep = sagactl("sweep", "--json").json()["report"]
    assert sweep["action_keys"] == [RELEASE_KEY]  # only the other case's action is left
    # The queue: no message of this case; every other one visible again, received once more.
    left = receive_all(three_open)
    assert left and all(m["case_id"] != CARRIER_UNAVAILABLE for m in left)
    assert {m["case_id"] for m in left} == {SHIPMENT_REJECTED, COMPENSATION_STUCK}
    assert queue_depth(three_open) == (0, 0)
    # Off the worklist; a second resolution is refused and changes nothing.
    listed = [e["case_id"] for e in sagactl("escalations", "--json").json()["escalations"]]
    assert listed == [SHIPMENT_REJECTED, COMPENSATION_STUCK]
    again = sagactl("escalations", "resolve", CARRIER_UNAVAILABLE, "--decision", "other", "--json")
    assert again.code == 3
    assert again.json()["error"]["type"] == "AlreadyResolved"
    assert "was resolved by" in again.json()["error"]["message"]
    assert case_record(three_open, CARRIER_UNAVAILABLE) == case_after
    shown = sagactl("escalations", "show", CARRIER_UNAVAILABLE)
    assert "  not open: case case-carrier-unavailable was resolved by" in shown.out
    assert "    settled         by " in shown.out


def test_a_resolved_compensation_is_not_redriven_into_an_effect(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    stock_before = stock(three_open)  # the stuck case's reservation is still held
    release_before = ledger_item(three_open, RELEASE_KEY)

    resolved = sagactl(
        "escalations",
        "resolve",
        COMPENSATION_STUCK,
        "--decision",
        "stock counted by hand: keep the reservation for the manual replacement",
        "--by",
        "ops@acme",
    )
    assert resolved.code == 0, resolved.err
    assert "resolved case case-compensation-stuck" in resolved.out
    assert f"  settled   {RELEASE_KEY}" in resolved.out
    assert case_record(three_open, COMPENSATION_STUCK)["outcome"] == {"S": "COMPENSATION_PENDING"}

    refused = sagactl("redrive", COMPENSATION_STUCK, "--yes", "--json")
    assert refused.code == 3
    assert "was resolved by ops@acme" in refused.json()["error"]["message"]
    assert "stock counted by hand" not in refused.json()["error"]["message"]

    # Step Functions itself allows the redrive; the ledger refuses to dispatch.
    sfn = three_open.client("stepfunctions")
    arn = sagactl("status", COMPENSATION_STUCK, "--json").json()["execution"]["executionArn"]
    sfn.redrive_execution(executionArn=arn)
    described = three_open.wait_for_execution(arn)
    assert (described["status"], described["error"]) == ("FAILED", "ActionSettled")
    assert "resolved by ops@acme" in described["cause"]
    assert stock(three_open) == stock_before  # nothing released
    release_after = ledger_item(three_open, RELEASE_KEY)
    assert release_after["attempts"] == release_before["attempts"]  # no delivery counted
    assert release_after["status"] == release_before["status"]
    listed = [e["case_id"] for e in sagactl("escalations", "--json").json()["escalations"]]
    assert COMPENSATION_STUCK not in listed  # still resolved: the decision stands


def test_a_case_that_is_not_open_cannot_be_resolved_and_bad_input_changes_nothing(
    three_open: LocalAws, sagactl: Sagactl
) -> None:
    happy_before = case_record(three_open, "case-happy-path")
    depth_before = queue_depth(three_open)

    done = sagactl("escalations", "resolve", "case-happy-path", "--decision", "x", "--json")
    assert done.code == 3
    assert done.json()["error"] == {
        "type": "CaseNotOpen",
        "message": "case case-happy-path is COMPLETED: there is nothing to decide; not resolved",
    }
    unknown = sagactl("escalations", "resolve", "case-nobody", "--decision", "x", "--json")
    assert unknown.code == 1 and unknown.json()["error"]["type"] == "NotFound"
    empty = sagactl("escalations", "resolve", CARRIER_UNAVAILABLE, "--decision", "  ", "--json")
    assert empty.code == 2 and empty.json()["error"]["message"] == "--decision must not be empty"
    long = sagactl("escalations", "resolve", CARRIER_UNAVAILABLE, "--decision", "x" * 2001)
    assert long.code == 2 and "at most 2000" in long.err
    bad_id = sagactl("escalations", "resolve", "no such case!", "--decision", "x")
    assert bad_id.code == 2 and "is not a case id" in bad_id.err
    missing = sagactl("escalations", "resolve", CARRIER_UNAVAILABLE)
    assert missing.code == 2 and "--decision" in missing.err

    assert case_record(three_open, "case-happy-path") == happy_before
    assert "resolution" not in case_record(three_open, CARRIER_UNAVAILABLE)
    assert "resolution" not in ledger_item(three_open, SHIP_KEY)
    assert queue_depth(three_open) == depth_before
    assert len(sagactl("escalations", "--json").json()["escalations"]) == 3


class WorkerCrashed(BaseException):
    """A delivery still running (here: it died mid-effect, its lease not yet over)."""


def test_a_case_whose_action_a_live_attempt_holds_is_not_resolved(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    case_id, tenant = "case-held", "acme"
    ship = ActionRequest(
        tenant_id=tenant,
        operation=Operation.SHIP.value,
        action_id=action_id_for(case_id, Operation.SHIP),
        digest="sha256:" + "0" * 64,
        case_id=case_id,
    )
    ledger = ActionLedger(saga.outputs["LedgerTableName"], saga.client("dynamodb"), LedgerPolicy())

    def crash() -> Any:
        raise WorkerCrashed

    with contextlib.suppress(WorkerCrashed):
        ledger.execute(ship, Attempt("delivery-1", 600), effect=crash, reconcile=Absent)
    escalation = {"reason": "OUTCOME_UNCERTAIN", "step": "ship", "decision_needed": "check"}
    saga.client("dynamodb").put_item(
        TableName=saga.outputs["CasesTableName"],
        Item=to_item(
            {
                "case_id": case_id,
                "tenant_id": tenant,
                "outcome": "ESCALATED",
                "escalation": escalation,
                "updated_at": "2026-01-01T00:00:00Z",
            }
        ),
    )
    held = ledger_item(saga, ship.key)

    result = sagactl("escalations", "resolve", case_id, "--decision", "x", "--json")

    assert result.code == 3
    error = result.json()["error"]
    assert error["type"] == "ActionInFlight"
    assert f"{ship.key} is held by attempt delivery-1 until" in error["message"]
    assert error["message"].endswith("nothing was resolved")
    assert "resolution" not in case_record(saga, case_id)
    assert ledger_item(saga, ship.key) == held


@pytest.mark.parametrize(
    ("example", "settled"),
    [
        # the open ship action, and the release that had no record (a SETTLED one now)
        ("carrier-unavailable", [SHIP_KEY, "acme#release#case-carrier-unavailable.reserve"]),
        ("shipment-rejected", []),  # every action closed: nothing to settle
    ],
)
def test_two_people_resolving_at_once_record_exactly_one_decision(
    saga: LocalAws, sagactl: Sagactl, example: str, settled: list[str]
) -> None:
    run_example(sagactl, saga, example)
    case_id = f"case-{example}"  # the example files name their case after themselves
    mine = local_target_from_outputs(saga.outputs)
    theirs = local_target_from_outputs(saga.outputs)  # other clients: no hook below
    raced: list[ResolveReport] = []

    def the_other_person_first(**_: Any) -> None:
        if not raced:
            raced.append(resolve(theirs, case_id, decision="theirs", by="bo", budget=8))

    mine.client("dynamodb").meta.events.register(
        "before-call.dynamodb.TransactWriteItems", the_other_person_first
    )
    with pytest.raises(AlreadyResolved, match="was resolved by bo"):
        resolve(mine, case_id, decision="mine", by="al", budget=8)

    [their_report] = raced
    assert their_report.settled == settled
    record = case_record(saga, case_id)["resolution"]["M"]
    assert (record["by"], record["decision"]) == ({"S": "bo"}, {"S": "theirs"})
    for key in settled:
        assert ledger_item(saga, key)["resolution"]["M"]["by"] == {"S": "bo"}


def test_a_case_whose_execution_is_gone_is_open_and_says_so(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    gone = saga.outputs["StateMachineArn"].replace(":stateMachine:", ":execution:") + ":old"
    saga.client("dynamodb").put_item(
        TableName=saga.outputs["CasesTableName"],
        Item=to_item(
            {
                "case_id": "case-old",
                "tenant_id": "acme",
                "outcome": "IN_PROGRESS",
                "execution_arn": gone,
                "updated_at": "2026-01-01T00:00:00Z",
            }
        ),
    )

    [listed] = sagactl("escalations", "--json").json()["escalations"]

    assert (listed["case_id"], listed["reason"], listed["execution_arn"]) == (
        "case-old",
        "EXECUTION_NOT_FOUND",
        gone,
    )
    assert "settle its open actions by hand" in listed["decision_needed"]


def test_a_revision_run_under_its_own_execution_name_is_worked_the_same_way(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    """A re-approved revision runs as `<case id>--r<revision>`: the failed-execution rule's
    message then names the execution, not the case id; the case record binds that execution."""
    case = json.loads(example("compensation-stuck").read_text(encoding="utf-8"))
    case["approval"]["revision"] = 2
    path = tmp_path / "revision-2.json"
    path.write_text(json.dumps(sign_locally(case)), encoding="utf-8")
    started = sagactl("start", str(path), "--json")
    assert started.code == 0, started.err
    arn = started.json()["execution_arn"]
    assert arn.endswith(f":{COMPENSATION_STUCK}--r2")
    saga.wait_for_execution(arn, timeout_seconds=120)

    [listed] = sagactl("escalations", "--json").json()["escalations"]
    assert (listed["case_id"], listed["execution_arn"]) == (COMPENSATION_STUCK, arn)
    assert listed["redrive"]["can_help"] is True

    resolved = sagactl("escalations", "resolve", COMPENSATION_STUCK, "--decision", "x", "--json")

    assert resolved.code == 0, resolved.err
    assert resolved.json()["settled_actions"] == [RELEASE_KEY]  # the others are closed
    assert resolved.json()["queue"] == {"removed": 1, "released": 0}  # the rule's message
    assert receive_all(saga) == []
