"""`sagactl ledger` and `sagactl stuck` against the real stack in the local AWS."""

from __future__ import annotations

from local_aws.environment import LocalAws
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl

__all__ = ["saga", "sagactl"]


def test_ledger_by_action_key(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "happy-path")

    record = sagactl("ledger", "acme#refund#case-happy-path.refund", "--json").json()

    assert record["action_key"] == "acme#refund#case-happy-path.refund"
    assert (record["status"], record["attempts"]) == ("COMPLETED", 1)
    assert record["remaining_budget"] == record["budget"] - 1
    assert record["downstream_ref"].startswith("re_")
    assert record["business_ref"] == "case-happy-path.refund"
    assert record["case_id"] == "case-happy-path"


def test_ledger_by_case_derives_every_key(saga: LocalAws, sagactl: Sagactl) -> None:
    run_example(sagactl, saga, "happy-path")

    listing = sagactl("ledger", "--case", "case-happy-path", "--json").json()

    assert listing["tenant_id"] == "acme"
    keys = {step: entry["action_key"] for step, entry in listing["actions"].items()}
    assert keys == {
        "reserve": "acme#reserve#case-happy-path.reserve",
        "refund": "acme#refund#case-happy-path.refund",
        "ship": "acme#ship#case-happy-path.ship",
        "release": "acme#release#case-happy-path.reserve",
    }
    statuses = {
        step: (entry["record"] or {}).get("status") for step, entry in listing["actions"].items()
    }
    assert statuses == {
        "reserve": "COMPLETED",
        "refund": "COMPLETED",
        "ship": "COMPLETED",
        "release": None,
    }


def test_ledger_refusals(saga: LocalAws, sagactl: Sagactl) -> None:
    missing = sagactl("ledger", "acme#refund#nope.refund")
    assert missing.code == 1 and "no ledger record for acme#refund#nope.refund" in missing.err

    malformed = sagactl("ledger", "not-a-key")
    assert malformed.code == 2 and "not an action key" in malformed.err

    both = sagactl("ledger", "acme#refund#x.refund", "--case", "x")
    assert both.code == 2

    # A value with `#` is an action key's, never a case's: a usage error, with or without the
    # tenant (which would otherwise derive keys from it), before any call.
    for argv in (
        ("--case", "acme#refund#case-happy-path.refund"),
        ("--case", "acme#refund#x", "--tenant", "acme"),
        ("--case", "case-1", "--tenant", "ac#me"),
    ):
        bad = sagactl("ledger", *argv, "--json")
        assert bad.code == 2, bad.err
        assert bad.json()["error"]["type"] == "UsageError"
        assert "is not a case id" in bad.out or "is not a tenant id" in bad.out

    unknown_case = sagactl("ledger", "--case", "never-started", "--json")
    assert unknown_case.code == 1
    assert unknown_case.json()["error"]["type"] == "NotFound"
    assert "--tenant" in unknown_case.json()["error"]["message"]


def test_stuck_lists_the_unfinished_compensation(saga: LocalAws, sagactl: Sagactl) -> None:
    assert sagactl("stuck", "--json").json()["stuck"] == []

    run_example(sagactl, saga, "compensation-stuck")

    stuck = sagactl("stuck", "--json").json()["stuck"]
    assert [(a["action_key"], a["status"]) for a in stuck] == [
        ("acme#release#case-compensation-stuck.reserve", "UNKNOWN")
    ]
    assert stuck[0]["case_id"] == "case-compensation-stuck"
    patient = sagactl("stuck", "--grace", "3600", "--json").json()
    assert patient["stuck"] == []
