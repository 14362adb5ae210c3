"""A fixed-seed slice of the fault campaign, as `make campaign` runs it (shards, report)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fault_campaign.escalated import ESCALATION_REASONS
from fault_campaign.generator import INVALID_KINDS
from fault_campaign.operator import STEPS as OPERATOR_STEPS
from fault_campaign.orchestrate import (
    SLICE_CASES,
    SLICE_SEED,
    load_results,
    shard_environment,
    slice_command,
)

ROOT = Path(__file__).resolve().parents[2]
FEW = 3


# The subprocess's own 900 s bounds it; pytest's 300 s default would cut a slice that a loaded
# 2-core machine runs in ~10 minutes (about 2.5 minutes when idle).
@pytest.mark.timeout(960)
@pytest.mark.runs_first
def test_a_slice_of_the_campaign_finds_every_case_honest(tmp_path: Path) -> None:
    directory = tmp_path / "campaign"
    report = tmp_path / "campaign.md"
    completed = subprocess.run(  # noqa: PLW1510 (asserted below, after the results)
        [sys.executable, *slice_command(directory), "--report", str(report)],
        cwd=ROOT,
        env=shard_environment(0.02),
        capture_output=True,
        text=True,
        timeout=900,
    )
    blocks = load_results(directory)
    cases = [case for block in blocks for case in block["cases"]]
    violations = [v for case in cases for v in case["violations"]] + [
        v for block in blocks for v in block["violations"]
    ]
    assert violations == [], json.dumps(violations, indent=1)[:4000]
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert sorted(case["index"] for case in cases) == list(range(SLICE_CASES))
    # Every terminal outcome, every escalation reason and a person's decision, a few times each.
    closes = Counter(kind for case in cases for kind in case["closes"])
    for outcome in ("COMPLETED", "ESCALATED", "REJECTED", "FAILED_RESUMABLE"):
        assert closes[outcome] >= FEW, (outcome, closes)
    assert closes["COMPENSATION_PENDING"] >= FEW, closes  # stuck compensations
    reasons = Counter(case["reason"] for case in cases if case["reason"])
    assert {reason: reasons[reason] >= FEW for reason in ESCALATION_REASONS} == dict.fromkeys(
        ESCALATION_REASONS, True
    ), reasons
    # Every way a case is generated invalid, each refused with its error (the oracle), a few times.
    invalid = Counter(case["invalid"] for case in cases if case["invalid"])
    assert {kind: invalid[kind] >= FEW for kind in INVALID_KINDS} == dict.fromkeys(
        INVALID_KINDS, True
    ), invalid
    executions = Counter(kind for case in cases for kind in case["executions"].values())
    assert executions["DUPLICATE"] >= FEW
    outcomes = Counter(case["outcome"] for case in cases)
    assert outcomes["RESOLVED"] >= FEW, outcomes
    steps = Counter(e["step"] for case in cases for e in case["operator"])
    assert all(steps[step] >= FEW for step in OPERATOR_STEPS), steps
    # Reruns of resolved cases attempted and refused (REFUSED), each way a few times.
    refused = Counter(e["step"] for case in cases for e in case["operator"] if e.get("refused"))
    assert refused["redrive:sagactl"] >= FEW and refused["redrive:plain"] >= FEW, refused
    fired = {":".join(f.split(":")[:1]) for case in cases for f in case["fired"]}
    assert {"crash", "dynamodb", "jump", "overlap"} <= fired
    assert sum(case["redrives"] for case in cases) > 0
    assert sum(case["checks"] for case in cases) > 20 * SLICE_CASES
    # Deliveries of one action in flight at once (fault_campaign/overlap.py), in each step.
    overlapped = Counter[str]()
    for case in cases:
        overlapped.update(case["overlaps"])
    assert sum(overlapped.values()) >= 50, overlapped
    assert set(overlapped) >= {"reserve", "refund", "ship", "release"}, overlapped
    text = report.read_text(encoding="utf-8")
    assert "violations: 0**" in text and f"seed {SLICE_SEED}" in text
    assert "## Deliveries in flight at once" in text
    assert "| COMPENSATION_PENDING |" in text and "| RESOLVED |" in text
    assert report.with_suffix(".png").stat().st_size > 10_000
