"""`sagactl start`, `status` and `watch` against the real stack in the local AWS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_aws.environment import LocalAws
from tests.cli.sagactl_helpers import (
    Sagactl,
    example,
    executions,
    run_example,
    saga,
    sagactl,
    scan,
)
from tests.e2e.test_saga_paths import HAPPY_PATH

__all__ = ["saga", "sagactl"]


def test_start_is_idempotent_per_case_id(saga: LocalAws, sagactl: Sagactl) -> None:
    first = run_example(sagactl, saga, "happy-path")

    again = sagactl("start", str(example("happy-path")), "--json")

    assert again.code == 0, again.err
    second = again.json()
    assert first["created"] is True and second["created"] is False
    assert second["execution_arn"] == first["execution_arn"]
    assert (second["status"], second["same_input"]) == ("SUCCEEDED", True)
    assert second["console_url"] is None  # no console locally
    assert [e["name"] for e in executions(saga)] == ["case-happy-path"]
    assert len(scan(saga, "PaymentsTableName")) == 1
    text = sagactl("start", str(example("happy-path")))
    assert "already started" in text.out and "no new execution" in text.out


def test_start_refuses_an_invalid_case_file_and_starts_nothing(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case = json.loads(example("happy-path").read_text())
    case["shipment"]["address"]["country"] = "USA"
    case_file = tmp_path / "bad.json"
    case_file.write_text(json.dumps(case))

    result = sagactl("start", str(case_file))

    assert result.code == 2
    assert "shipment.address.country" in result.err
    assert executions(saga) == []


def test_start_refuses_a_stale_approval(saga: LocalAws, sagactl: Sagactl, tmp_path: Path) -> None:
    case = json.loads(example("happy-path").read_text())
    case["refund"]["amount_minor"] = 99_999
    case_file = tmp_path / "edited.json"
    case_file.write_text(json.dumps(case))

    result = sagactl("start", str(case_file), "--json")

    assert result.code == 2
    assert "approval.digest does not match" in result.json()["error"]["message"]
    assert executions(saga) == []


def test_status_of_the_happy_path(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "happy-path")

    view = sagactl("status", "case-happy-path", "--json").json()

    assert (view["status"], view["outcome"], view["tenant_id"]) == (
        "SUCCEEDED",
        "COMPLETED",
        "acme",
    )
    entered = [e["state"] for e in view["timeline"] if e["kind"] == "entered"]
    assert entered == HAPPY_PATH
    actions = view["actions"]
    assert actions["reserve"]["action_key"] == "acme#reserve#case-happy-path.reserve"
    for step in ("reserve", "refund", "ship"):
        record = actions[step]["record"]
        assert (record["status"], record["attempts"]) == ("COMPLETED", 1), step
    assert actions["refund"]["record"]["downstream_ref"].startswith("re_")
    assert actions["release"]["record"] is None
    assert view["effects"]["refunds"] == 1 and view["effects"]["shipments"] == 1
    assert view["effects"]["reservation"]["status"] == "HELD"
    assert (view["compensations"], view["escalation"]) == ([], None)
    assert view["failed_step"] is None

    text = sagactl("status", "case-happy-path")
    assert text.code == 0
    assert "-> CreateShipment" in text.out and "outcome: COMPLETED" in text.out


def test_status_shows_a_caught_lost_response_and_its_reconciliation(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    run_example(sagactl, saga, "lost-refund-response")

    view = sagactl("status", "case-lost-refund-response", "--json").json()

    caught = [e for e in view["timeline"] if e["kind"] == "caught"]
    assert [(e["state"], e["error"]) for e in caught] == [("IssueRefund", "OutcomeUnknown")]
    assert "next ReconcileStep" in caught[0]["text"]
    refund = view["actions"]["refund"]["record"]
    assert refund["status"] == "COMPLETED"
    assert view["effects"]["refunds"] == 1  # reconciled, not refunded twice
    assert view["outcome"] == "COMPLETED"


def test_status_shows_compensation_and_escalation(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "shipment-rejected")

    view = sagactl("status", "case-shipment-rejected", "--json").json()

    assert (view["status"], view["outcome"]) == ("SUCCEEDED", "ESCALATED")
    assert view["escalation"]["reason"] == "SHIPMENT_REJECTED"
    assert [c["action_key"] for c in view["compensations"]] == [
        "acme#release#case-shipment-rejected.reserve"
    ]
    assert view["actions"]["ship"]["record"]["status"] == "FAILED"
    assert view["actions"]["release"]["record"]["status"] == "COMPLETED"
    assert view["effects"] | {"reservation": None} == {
        "refunds": 1,
        "shipments": 0,
        "reservation": None,
    }
    assert view["effects"]["reservation"]["status"] == "RELEASED"
    assert view["escalation_queue_depth"] == 1


def test_status_of_an_unknown_case(saga: LocalAws, sagactl: Sagactl) -> None:
    result = sagactl("status", "no-such-case", "--json")

    assert result.code == 1
    assert result.json()["error"]["type"] == "NotFound"
    assert "no execution for case no-such-case" in result.json()["error"]["message"]


@pytest.mark.parametrize("command", ["status", "watch", "redrive"])
@pytest.mark.parametrize("case", ["", "acme#refund#case-1", "x" * 81])
def test_a_malformed_case_id_is_a_usage_error_before_any_call(
    saga: LocalAws, sagactl: Sagactl, command: str, case: str
) -> None:
    result = sagactl(command, case, "--json")

    assert result.code == 2, result.err
    assert result.json()["error"]["type"] == "UsageError"
    assert f"{case!r} is not a case id" in result.json()["error"]["message"]


def test_watch_streams_entries_then_the_case(saga: LocalAws, sagactl: Sagactl) -> None:
    result = sagactl("start", str(example("happy-path")), "--watch", "--json", "--timeout", "60")

    assert result.code == 0, result.err
    report, *stream = result.json_lines("created", "entry", "case")
    assert report["created"] is True
    entries = [line["entry"] for line in stream if "entry" in line]
    assert entries[0]["kind"] == "started"
    assert entries[-1]["kind"] == "execution_succeeded"
    assert len({e["event_id"] for e in entries}) == len(entries)  # each printed once
    assert stream[-1]["case"]["outcome"] == "COMPLETED"

    watched = sagactl("watch", "case-happy-path", "--interval", "0.05")
    assert watched.code == 0
    assert "execution SUCCEEDED: case COMPLETED" in watched.out
    assert "outcome: COMPLETED" in watched.out


def test_commands_need_the_local_outputs(saga: LocalAws, sagactl: Sagactl, tmp_path: Path) -> None:
    result = sagactl("status", "x", "--outputs", str(tmp_path / "none.json"))

    assert result.code == 1
    assert "no local outputs" in result.err and "sagactl local up" in result.err


def test_start_of_a_case_that_already_ran_under_another_name_says_duplicate_in_one_line(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    """Started once from the console under another name: the case record names that execution,
    so `sagactl start` starts nothing (a new execution would only end DUPLICATE)."""
    case = json.loads(example("happy-path").read_text())
    original = saga.start_case(case, name="from-the-console")
    saga.wait_for_execution(original)

    result = sagactl("start", str(example("happy-path")))

    assert result.code == 7, result.err  # DUPLICATE
    assert result.out.splitlines() == [
        f"case case-happy-path already ran as {original} (outcome COMPLETED): DUPLICATE, "
        "nothing started"
    ]
    assert sagactl("start", str(example("happy-path")), "--watch").code == 7
    assert [e["name"] for e in executions(saga)] == ["from-the-console"]
    assert len(scan(saga, "PaymentsTableName")) == 1
    as_json = sagactl("start", str(example("happy-path")), "--json")
    assert as_json.code == 7
    report = as_json.json()
    assert (report["duplicate"], report["created"], report["execution_arn"]) == (
        True,
        False,
        original,
    )
