"""The campaign's own parts: generation is a function of the seed, the invariants can fail, the
shrinker finds a minimal plan, the mutant list applies exactly once."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fault_campaign.approval import (
    FOUR_EYES_APPROVERS,
    FOUR_EYES_TENANT,
    FOUR_EYES_THRESHOLDS,
    TWO_NAMES_APPROVER,
    TWO_NAMES_KEY_ARN,
    TWO_NAMES_MATERIAL,
    campaign_ceilings,
    campaign_context,
    comparable,
)
from fault_campaign.generator import INVALID_KINDS, block_stock, generate
from fault_campaign.invariants import check_account, check_case
from fault_campaign.mutants import MUTANTS, Mutant, MutantDoesNotApply, apply, by_name
from fault_campaign.observe import Snapshot
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun
from fault_campaign.shrink import shrink
from local_aws.approval_keys import local_key_arn, local_public_key_der
from saga.acceptance import accept_new_case
from saga.approval_keys import ApproverKeys, PublicKey
from saga.approvals import ApprovalVerifier
from saga.ceilings import check_within_ceiling
from saga.errors import ApprovalInvalid, SagaError
from saga.models import Case, parse_case
from saga.tools.validate import checked_case
from sagactl.config import cdk_config
from sagactl.paths import CDK_JSON
from stacks.config import SagaConfig

ROOT = Path(__file__).resolve().parents[2]
OWNER = "arn:aws:states:us-east-1:123456789012:execution:sm:c1"


def test_a_seed_gives_the_same_campaign_and_another_seed_another() -> None:
    def campaign(seed: int) -> list[CasePlan]:
        return [generate(seed, i, block_size=20) for i in range(60)]

    def comparable_plans(plans: list[CasePlan]) -> list[str]:
        return [replace(p, case=comparable(p.case)).dumps() for p in plans]

    first, again, other = campaign(5), campaign(5), campaign(6)
    assert comparable_plans(first) == comparable_plans(again)
    # Signed fields equal, signature bytes not (ECDSA is randomized): both verify.
    assert [p.case["approval"].get("signature") for p in first] != [
        p.case["approval"].get("signature") for p in again
    ]
    assert first != other
    assert first != other
    assert block_stock(5, 3) == block_stock(5, 3)


def test_generated_cases_are_valid_unless_generated_to_be_rejected() -> None:
    rejected = 0
    for index in range(300):
        plan = generate(9, index, block_size=25)
        if plan.expect_rejection is None:
            parse_case(plan.case)  # raises on anything ValidateCase would refuse for format
            address = plan.case["shipment"]["address"]
            assert all(len(address[f]) <= 35 for f in ("name", "line1", "city"))
        elif plan.expect_rejection == "InvalidRequest":
            rejected += 1
            with pytest.raises(SagaError):
                parse_case(plan.case)
    assert rejected > 0


def test_twins_have_equal_parameters_and_their_own_case_id() -> None:
    twins = [generate(3, i, block_size=50) for i in range(400)]
    pairs = [(twins[p.twin_of], p) for p in twins if p.twin_of is not None]
    assert pairs, "no twin in 400 cases"
    for sibling, twin in pairs:
        assert twin.case_id != sibling.case_id
        assert twin.case["refund"] == sibling.case["refund"] or sibling.expect_rejection
        assert twin.case["shipment"] == sibling.case["shipment"] or sibling.expect_rejection


class _LocalKeys:
    """KMS's GetPublicKey for the local approvers' keys (what the local AWS answers), and the
    campaign's key of the controller's material under another name."""

    def public_key(self, key: str) -> PublicKey:
        if key == TWO_NAMES_KEY_ARN:
            return PublicKey(key, local_public_key_der(*TWO_NAMES_MATERIAL))
        for tenant, approvers in _campaign_config().tenants.items():
            for approver in approvers:
                if local_key_arn(tenant, approver) == key:
                    return PublicKey(key, local_public_key_der(tenant, approver))
        raise AssertionError(key)


def _campaign_config() -> SagaConfig:
    """The campaign's stack's configuration: cdk.json's with the campaign's context."""
    context = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    return SagaConfig.from_mapping({**context, **campaign_context()})


def _verifier() -> ApprovalVerifier:
    """The verifier every tool uses, with the local approvers' keys as the campaign's stack
    configures them (a brought key by its ARN)."""
    config = _campaign_config()
    trusted = {
        tenant: {
            a: ApproverKeys(config.approver_keys(tenant, a).key_arn or local_key_arn(tenant, a))
            for a in approvers
        }
        for tenant, approvers in config.tenants.items()
    }
    return ApprovalVerifier(trusted, _LocalKeys(), thresholds=config.approval_thresholds)


def test_every_invalid_kind_comes_round_and_is_refused_with_the_error_it_expects() -> None:
    """The kinds go round (each comes every len(INVALID_KINDS) invalid cases): 300 cases hold
    each a few times; each is refused in ValidateCase's order (its fields, tenant and approver,
    digest, signature) with the error the plan expects. A colleague's key presented as the
    approver's is refused as someone else's key (§9), not as a bad signature."""
    tenants = {tenant: frozenset(a) for tenant, a in cdk_config().tenants.items()}
    verifier = _verifier()
    started = datetime(2026, 6, 1, tzinfo=UTC)  # after the expired kind's deadline

    def verify_signature(case: Case) -> None:
        accept_new_case(verifier, case.signed_approvals(), started=started)

    kinds: Counter[str] = Counter()
    for plan in (generate(9, index, block_size=25) for index in range(300)):
        if plan.invalid is None:
            continue
        kinds[plan.invalid] += 1
        assert f"invalid:{plan.invalid}" in plan.fault_classes()
        with pytest.raises(SagaError) as refused:
            case = checked_case(plan.case, tenants, verify_signature)
            refund = case.refund
            check_within_ceiling(
                campaign_ceilings(), case.tenant_id, refund.currency, refund.amount_minor
            )
        assert type(refused.value).__name__ == plan.expect_rejection, (plan.invalid, refused)
        if plan.invalid == "colleague":
            assert "is a key of 'cfo@hooli' of tenant 'hooli'" in str(refused.value)
    assert {kind: kinds[kind] >= 3 for kind in INVALID_KINDS} == dict.fromkeys(
        INVALID_KINDS, True
    ), kinds
    assert kinds["ceiling"] and kinds["ceiling-currency"], kinds


def test_four_eyes_cases_are_generated_each_way_and_verify_as_their_kind_says() -> None:
    """Above the four-eyes tenant's threshold (as cdk.json configures it): signed by two
    distinct approvers (accepted), once, twice by one, with a forged co-signature, or by one
    signer under two names (each ApprovalInvalid), checked with the verifier every tool uses."""
    config = cdk_config()
    assert config.approval_thresholds == {FOUR_EYES_TENANT: FOUR_EYES_THRESHOLDS}
    assert config.tenants[FOUR_EYES_TENANT] == FOUR_EYES_APPROVERS
    campaign = _campaign_config()
    assert campaign.tenants[FOUR_EYES_TENANT] == (*FOUR_EYES_APPROVERS, TWO_NAMES_APPROVER)
    assert campaign.approver_keys(FOUR_EYES_TENANT, TWO_NAMES_APPROVER).key_arn == (
        TWO_NAMES_KEY_ARN
    )
    verifier = _verifier()
    plans = [generate(9, index, block_size=25) for index in range(1200)]
    kinds: Counter[str] = Counter()
    for plan in plans:
        if plan.four_eyes is None:
            # a colleague's key presented as the approver's: the one invalid kind of the tenant
            assert plan.case["tenant_id"] != FOUR_EYES_TENANT or plan.invalid == "colleague"
            continue
        kinds[plan.four_eyes] += 1
        approvals = parse_case(plan.case).signed_approvals()
        assert verifier.required(approvals) == 2
        started = datetime(2026, 6, 1, tzinfo=UTC)
        if plan.expect_rejection is None:
            assert len(accept_new_case(verifier, approvals, started=started).keys) == 2
        else:
            assert plan.expect_rejection == "ApprovalInvalid"
            with pytest.raises(ApprovalInvalid):
                accept_new_case(verifier, approvals, started=started)
    assert set(kinds) == {"two", "once", "twice", "forged", "two-names"}, kinds


def _snapshot(**overrides: Any) -> Snapshot:
    values: dict[str, Any] = {
        "label": "closed",
        "clock": 1000.0,
        "ledger": {},
        "case_record": {"case_id": "c1", "outcome": "COMPLETED", "execution_arn": OWNER},
        "refunds": [],
        "shipments": [],
        "reservations": [],
        "executions": {},
    }
    values.update(overrides)
    return Snapshot(**values)


def _completed_execution() -> dict[str, Any]:
    return {
        "arn": OWNER,
        "name": "c1",
        "status": "SUCCEEDED",
        "output": {
            "outcome": "COMPLETED",
            "steps": {
                "reserve": {"action_key": "acme#reserve#c1.reserve", "downstream_ref": None},
                "refund": {"action_key": "acme#refund#c1.refund", "downstream_ref": "re_1"},
                "ship": {"action_key": "acme#ship#c1.ship", "downstream_ref": "shp_1"},
            },
            "compensations": [],
            "escalation": None,
        },
        "path": ["ValidateCase", "ReserveStock", "IssueRefund", "CreateShipment"],
        "last_state": "CreateShipment",
        "error": None,
        "retries": 0,
        "reconciliations": 0,
        "invocations": 5,
    }


def _run(snapshot: Snapshot) -> CaseRun:
    plan = generate(1, 0, block_size=10)
    plan.case["case_id"] = "c1"
    plan.case["reserve"] = {"sku": "CMP-A", "quantity": 1}
    run = CaseRun(plan=plan, stock_before=10, stock_after=9, snapshots=[snapshot])
    run.owner_arn = OWNER
    return run


def _refund(refund_id: str, case: dict[str, Any]) -> dict[str, Any]:
    return {"refund_id": refund_id, "case_id": "c1", **case["refund"]}


def test_two_refunds_and_an_unrecorded_effect_are_violations() -> None:
    run = _run(_snapshot())
    case = run.plan.case
    run.snapshots = [
        _snapshot(
            refunds=[_refund("re_1", case), _refund("re_2", case)],
            ledger={
                "refund": {
                    "action_key": "acme#refund#c1.refund",
                    "status": "IN_PROGRESS",
                    "attempts": 1,
                }
            },
            executions={OWNER: _completed_execution()},
        )
    ]
    checks = check_case(run, budget=8)
    found = {v["invariant"] for v in checks.violations}
    assert {"one_refund", "effect_recorded", "completed_means_done"} <= found
    assert checks.run > 10


def test_a_consistent_completed_case_passes_every_check() -> None:
    run = _run(_snapshot())
    case = run.plan.case
    address = case["shipment"]["address"]
    run.snapshots = [
        _snapshot(
            refunds=[_refund("re_1", case)],
            shipments=[
                {
                    "shipment_id": "shp_1",
                    "case_id": "c1",
                    "address": address,
                    "sku": "CMP-A",
                    "quantity": 1,
                }
            ],
            reservations=[
                {
                    "reservation_id": "k",
                    "case_id": "c1",
                    "sku": "CMP-A",
                    "quantity": 1,
                    "status": "HELD",
                }
            ],
            ledger={
                "reserve": {
                    "action_key": "acme#reserve#c1.reserve",
                    "status": "COMPLETED",
                    "attempts": 1,
                },
                "refund": {
                    "action_key": "acme#refund#c1.refund",
                    "status": "COMPLETED",
                    "attempts": 1,
                    "downstream_ref": "re_1",
                },
                "ship": {
                    "action_key": "acme#ship#c1.ship",
                    "status": "COMPLETED",
                    "attempts": 9,
                    "downstream_ref": "shp_1",
                },
            },
            executions={OWNER: _completed_execution()},
        )
    ]
    checks = check_case(run, budget=8)
    assert [v["invariant"] for v in checks.violations] == ["attempts_within_budget"]


def test_stock_that_is_not_conserved_is_a_violation() -> None:
    held = [{"case_id": "c1", "sku": "CMP-B", "quantity": 2, "status": "HELD"}]
    fine = check_account([_run(_snapshot())], {"CMP-B": 10}, {"CMP-B": 8}, held, [], [])
    assert fine.violations == []
    released_twice = check_account([], {"CMP-B": 10}, {"CMP-B": 11}, [], [], [])
    assert [v["invariant"] for v in released_twice.violations] == ["stock_conserved"]
    stranger = check_account([], {}, {}, held, [], [])
    assert [v["invariant"] for v in stranger.violations] == ["effects_belong_to_cases"]


def test_the_shrinker_keeps_only_what_makes_the_case_fail() -> None:
    plan = CasePlan(
        seed=1,
        index=7,
        case={
            "case_id": "c7",
            "sandbox": {
                "faults": {
                    "refund": ["timeout", "lose_response", "reject"],
                    "shipment": ["timeout"],
                }
            },
        },
        nemeses=[
            {"kind": "jump", "at_request": 3, "seconds": 45},
            {"kind": "crash", "effect": "refund"},
        ],
        duplicate={"when": "concurrent"},
        redrives=[{"jump": 60, "heal": True}],
    )

    def fails(candidate: CasePlan) -> bool:
        crash = any(n["kind"] == "crash" for n in candidate.nemeses)
        return crash and "lose_response" in candidate.faults.get("refund", [])

    minimal, runs = shrink(plan, fails)
    assert minimal.nemeses == [{"kind": "crash", "effect": "refund"}]
    assert minimal.faults == {"refund": ["lose_response"]}
    assert minimal.duplicate is None and minimal.redrives == []
    assert runs <= 24


def test_every_curated_mutant_applies_exactly_once(tmp_path: Path) -> None:
    assert len(MUTANTS) >= 15
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for mutant in MUTANTS:
        text = (ROOT / mutant.file).read_text(encoding="utf-8")
        assert text.count(mutant.old) == 1, mutant.name
        assert mutant.new != mutant.old


def test_the_committed_mutant_table_has_a_row_for_every_curated_mutant_and_both_columns() -> None:
    """docs/mutants.md is the evidence the issue asks for: a mutant added to the catalogue
    without being measured, or a row left for one that no longer exists, fails here."""
    results = json.loads((ROOT / "docs" / "mutants.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in results] == [m.name for m in MUTANTS]
    assert [r["name"] for r in results if "suite" not in r] == []
    behavioural = [r for r in results if not r.get("outside_slice")]
    assert [r["name"] for r in behavioural if "campaign" not in r] == []


def test_a_mutant_whose_text_moved_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n", encoding="utf-8")
    with pytest.raises(MutantDoesNotApply, match="occurs 2 times"):
        apply(Mutant("twice", "rule", "f.py", "x = 1", "x = 2"), tmp_path)
    with pytest.raises(MutantDoesNotApply, match="occurs 0 times"):
        apply(Mutant("gone", "rule", "f.py", "y = 1", "y = 2"), tmp_path)
    apply(Mutant("once", "rule", "f.py", "x = 1\nx = 1", "x = 3"), tmp_path)
    assert (tmp_path / "f.py").read_text(encoding="utf-8") == "x = 3\n"


def test_a_stopped_mutate_run_resumes_only_results_of_the_same_tree(tmp_path: Path) -> None:
    from fault_campaign import mutate

    tree = tmp_path / "tree"
    (tree / "lambdas").mkdir(parents=True)
    (tree / "lambdas" / "a.py").write_text("x = 1\n", encoding="utf-8")
    before = mutate.tree_digest(tree)
    out = tmp_path / "mutate.json"
    suite = {"killed": True, "seconds": 3}
    mutate._save(str(out), [{"name": "budget", "killed": True, "tree": before, "suite": suite}])
    assert mutate._earlier(str(out), before)["budget"]["suite"] == suite

    (tree / "lambdas" / "a.py").write_text("x = 2\n", encoding="utf-8")
    assert mutate.tree_digest(tree) != before
    assert mutate._earlier(str(out), mutate.tree_digest(tree)) == {}


def test_a_mutant_its_own_tests_kill_costs_no_suite_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make mutate` runs a mutant's own tests first and the whole suite only if they pass: the
    suite column stays honest (those tests are in the suite) and costs seconds per mutant."""
    from fault_campaign import mutate

    runs: list[list[str]] = []
    failing = {"tests/unit/test_kills.py"}

    def run(command: list[str], tree: Path, timeout: float, log: Path) -> tuple[bool, float]:
        runs.append(command[1:])
        return bool(failing & set(command)), 10.0

    monkeypatch.setattr(mutate, "_run", run)
    baseline = mutate.Baseline(tmp_path, "digest", None)
    baseline.checked.add(("tests/unit/test_kills.py",))  # seen passing without the mutant
    hinted = Mutant("m", "rule", "f.py", "a", "b", tests=("tests/unit/test_kills.py",))
    assert mutate._suite(hinted, tmp_path, tmp_path, baseline, "a") == {
        "killed": True,
        "seconds": 10,
        "by": "its tests",
        "tests": ["test_kills.py"],
    }
    assert runs == [[*mutate.PYTEST, "tests/unit/test_kills.py"]]

    runs.clear()
    passing = replace(hinted, tests=("tests/unit/test_passes.py",))
    assert mutate._suite(passing, tmp_path, tmp_path, baseline, "a") == {
        "killed": False,
        "seconds": 20,
    }
    # The whole suite's baseline runs once, before the first mutant that needs the suite.
    assert runs == [[*mutate.PYTEST, "tests/unit/test_passes.py"], mutate.SUITE, mutate.SUITE]
    runs.clear()
    assert mutate._suite(passing, tmp_path, tmp_path, baseline, "a")["seconds"] == 20
    assert runs == [[*mutate.PYTEST, "tests/unit/test_passes.py"], mutate.SUITE]

    failing.add("tests/unit")  # a suite that fails without any mutant is no measure
    with pytest.raises(mutate.BaselineFails, match="the suite fails without any mutant"):
        mutate.Baseline(tmp_path, "digest", None).require()
    assert "by its tests: test_kills.py" in mutate._cell(
        {"suite": {"killed": True, "seconds": 10, "by": "its tests", "tests": ["test_kills.py"]}},
        "suite",
    )


def test_the_suite_baseline_runs_on_the_copy_without_the_mutant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole suite's baseline runs between a mutant's own tests and its suite run: on the
    copy without the mutant, else the mutant's kill reads as "the suite fails without any
    mutant" (a shipment-rejected release refused in test_grants_match_calls, 2026-12-01). Every
    run of the mutant sees it applied; the copy ends as the repository has it."""
    from fault_campaign import mutate

    (mutant,) = by_name(["release-blocked-by-rejected-shipment"])
    original = (mutate.ROOT / mutant.file).read_text(encoding="utf-8")
    tree = tmp_path / "tree"
    (tree / mutant.file).parent.mkdir(parents=True)
    (tree / mutant.file).write_text(original, encoding="utf-8")
    texts = {original: "as committed", original.replace(mutant.old, mutant.new): "mutant"}
    seen: list[tuple[str, str]] = []

    def run(command: list[str], tree: Path, timeout: float, log: Path) -> tuple[bool, float]:
        kind = "suite" if command[1:] == mutate.SUITE else command[-1].rsplit("/", 1)[-1]
        kind = "slice" if "fault_campaign" in command else kind
        seen.append((kind, texts.get((tree / mutant.file).read_text("utf-8"), "other")))
        return False, 1.0  # its own tests and the slice miss it, the suite passes

    monkeypatch.setattr(mutate, "_run", run)
    args = argparse.Namespace(skip_suite=False, skip_campaign=False)
    result = mutate.run_mutant(mutant, tree, args, mutate.Baseline(tree, "digest", None))

    assert seen == [
        ("test_tools_release_reconcile_outcome.py", "mutant"),
        ("suite", "as committed"),  # the baseline
        ("suite", "mutant"),
        ("slice", "mutant"),
    ]
    assert result["killed"] is False
    assert (tree / mutant.file).read_text("utf-8") == original


def test_every_mutant_names_the_tests_written_for_its_rule_and_they_exist() -> None:
    root = Path(__file__).resolve().parents[2]
    assert [mutant.name for mutant in MUTANTS if not mutant.tests] == []
    named = {test.split("::")[0] for mutant in MUTANTS for test in mutant.tests}
    assert [test for test in named if not (root / test).is_file()] == []


def test_the_mutate_command_refuses_a_mutant_that_no_longer_applies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fault_campaign import __main__ as cli
    from fault_campaign import mutants

    target = "lambdas/saga/ledger/decisions.py"
    moved = Mutant("moved", "rule", target, "no such text anywhere", "x")
    monkeypatch.setattr(mutants, "MUTANTS", (*mutants.MUTANTS, moved))
    assert cli.main(["mutate", "--check"]) == 2
    assert f"moved: old text found 0 times in {target}" in capsys.readouterr().err


def test_a_line_being_written_is_not_read_even_cut_inside_a_character(tmp_path: Path) -> None:
    """The orchestrator reads the shards' files while they write (its progress line); a line
    cut inside a multi-byte character failed the whole read, and the run with it."""
    from fault_campaign.shards import read_lines

    path = tmp_path / "shard-0.jsonl"
    done = json.dumps({"type": "block", "block": 0, "city": "서울"}, ensure_ascii=False)
    writing = json.dumps({"type": "block", "block": 1, "city": "서울"}, ensure_ascii=False)
    cut = writing.encode("utf-8")[: writing.encode("utf-8").index("서".encode()) + 1]
    path.write_bytes(done.encode("utf-8") + b"\n" + cut)

    assert read_lines(path) == [{"type": "block", "block": 0, "city": "서울"}]


def test_a_mutant_measured_in_two_runs_shows_both_columns_and_the_share(tmp_path: Path) -> None:
    """`--skip-suite` then `--skip-campaign` over the same tree: one result with both parts;
    the summary counts the slice's kills among the behavioural mutants only."""
    from fault_campaign import mutate

    named = {"name": "budget", "rule": "attempts within the budget", "tree": "t1"}
    slice_only = {**named, "campaign": {"killed": True, "seconds": 3}}
    suite_only = {**named, "suite": {"killed": False, "seconds": 9}}
    both = mutate.combined({**slice_only, "killed": True}, {**suite_only, "killed": False})
    assert (both["suite"], both["campaign"], both["killed"]) == (
        {"killed": False, "seconds": 9},
        {"killed": True, "seconds": 3, "tree": "t1"},
        True,
    )
    # A later run of one part keeps the other, labelled with the tree and commit it was run at.
    earlier = {**slice_only, "killed": True, "commit": "abc"}
    later = mutate.combined(earlier, {**suite_only, "tree": "t2", "commit": "def"})
    assert later["campaign"] == {"killed": True, "seconds": 3, "tree": "t1", "commit": "abc"}
    assert "killed (3 s, at abc)" in mutate._cell(later, "campaign")
    assert "survived (9 s, at def)" in mutate._cell(later, "suite")
    # Only the parts measured over this very tree resume a stopped run.
    out = tmp_path / "mutate.json"
    mutate._save(str(out), [later])
    assert set(mutate._earlier(str(out), "t1")["budget"]) & {"suite", "campaign"} == {"campaign"}
    assert set(mutate._earlier(str(out), "t2")["budget"]) & {"suite", "campaign"} == {"suite"}
    # A part that names its own commit keeps it: a third run does not relabel it as the row's.
    third = mutate.combined(later, {**named, "suite": suite_only["suite"], "tree": "t3"})
    assert third["campaign"] == later["campaign"]
    legacy = {**named, "tree": "t4", "campaign": {"killed": True, "seconds": 3, "commit": "abc"}}
    mutate._save(str(out), [legacy])
    assert mutate._earlier(str(out), "t4") == {}  # measured at abc, on a tree no one named

    outside = {
        "name": "displayed-amount",
        "rule": "amounts in the currency's decimals",
        "killed": True,
        "suite": {"killed": True, "seconds": 1},
        "campaign": {"killed": False, "seconds": 1},
        "outside_slice": "no case's execution displays an amount",
    }
    table = mutate._table([both, outside])
    assert "| budget |" in table and "survived (9 s) | killed (3 s) |" in table
    assert "outside the slice: no case's execution displays an amount" in table
    assert mutate.summary([both, outside]) == (
        "2 mutants: 1 of the 2 run against the suite killed by it, 2 killed in all; of the 1 "
        "behavioural ones, 1 run against the campaign slice alone, 1 (100%) of them killed by it."
    )
    not_run = {**named, "suite": {"killed": True, "seconds": 1}, "killed": True}
    assert mutate.summary([not_run]).endswith(  # a slice not run is not counted as survived
        "of the 1 behavioural ones, 0 run against the campaign slice alone, 0 (0%) of them "
        "killed by it."
    )


def test_the_slice_kills_a_mutant_only_by_a_named_invariant(tmp_path: Path) -> None:
    """A slice cell was "killed" for any non-zero exit, so a crash of the harness or a timeout
    read as a catch. Now a kill is exit 3 with a violation of a named invariant in the shards'
    results, and the cell names it; anything else is "not measured", never a kill."""
    from fault_campaign import mutate

    def shard(*blocks: dict[str, Any]) -> Path:
        directory = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
        directory.mkdir()
        lines = [json.dumps({"type": "block", "violations": [], **b}) for b in blocks]
        (directory / "shard-0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return directory

    ran = {"invariant": "case_ran", "detail": "TimeoutError: no terminal outcome"}
    held = {"invariant": "stock_follows_reservation", "detail": "HELD forever"}
    caught = shard(
        {"block": 1, "cases": [{"index": 12, "violations": [held]}]},
        {"block": 0, "cases": [{"index": 5, "violations": [ran]}, {"index": 7, "violations": []}]},
    )
    verdict = mutate.slice_verdict(3, caught, 41.6)
    assert verdict == {
        "killed": True,
        "invariant": "stock_follows_reservation",
        "case": 12,
        "seconds": 42,
    }
    assert "killed (42 s, by `stock_follows_reservation` in case 12, at abc)" in mutate._cell(
        {"campaign": {**verdict, "commit": "abc"}}, "campaign"
    )
    account = shard({"block": 2, "cases": [], "violations": [held]})
    assert mutate.slice_verdict(3, account, 1)["block"] == 2

    only_ran = shard({"block": 0, "cases": [{"index": 5, "violations": [ran]}]})
    assert mutate.slice_verdict(3, only_ran, 9) == {
        "killed": False,
        "error": "only cases that could not run",
        "seconds": 9,
    }
    # A crashed or timed-out slice is no kill, whatever its shards hold.
    assert mutate.slice_verdict(1, caught, 9)["error"] == "exit 1"
    assert mutate.slice_verdict(mutate.TIMED_OUT, caught, 1200)["error"] == "timed out"
    assert mutate.slice_verdict(0, caught, 9) == {"killed": False, "seconds": 9}
    unmeasured = {"name": "m", "campaign": mutate.slice_verdict(1, caught, 9), "killed": False}
    assert mutate._cell(unmeasured, "campaign") == "not measured: exit 1 (9 s)"
    assert "0 (0%) of them killed by it (1 not measured" in mutate.summary([unmeasured])
