"""Every ready example case parses, is approved (digest verifies) and has its own case id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saga.models import Case, parse_case, verify_approval

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.json"))
EXPECTED = {
    "happy-path",
    "lost-refund-response",
    "shipment-rejected",
    "out-of-stock",
    "compensation-stuck",
    "carrier-unavailable",
    "lost-carrier-response",
    "refund-rejected",
    "four-eyes",
}
# The four-eyes example is tenant hooli's, above its threshold: two approvers signed it.
FOUR_EYES = {"four-eyes": ("hooli", ("controller@hooli", "cfo@hooli"))}


def load(path: Path) -> Case:
    return parse_case(json.loads(path.read_text()))


def test_every_expected_example_exists() -> None:
    assert {path.stem for path in EXAMPLES} >= EXPECTED


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_parses_and_its_digest_verifies(path: Path) -> None:
    case = load(path)
    verify_approval(case)
    tenant, approvers = FOUR_EYES.get(path.stem, ("acme", ("supervisor@acme",)))
    assert case.tenant_id == tenant
    assert case.signed_approvals().approvers() == approvers


def test_examples_have_distinct_case_ids() -> None:
    ids = [load(path).case_id for path in EXAMPLES]
    assert len(ids) == len(set(ids))


def test_examples_carry_the_faults_their_names_promise() -> None:
    cases = {path.stem: load(path) for path in EXAMPLES}
    assert cases["happy-path"].sandbox.faults_for("refund") == []
    assert cases["lost-refund-response"].sandbox.faults_for("refund") == ["lose_response"]
    assert cases["refund-rejected"].sandbox.faults_for("refund") == ["reject"]
    assert cases["shipment-rejected"].sandbox.faults_for("shipment") == ["reject"]
    assert cases["carrier-unavailable"].sandbox.faults_for("shipment") == ["unavailable"]
    assert cases["lost-carrier-response"].sandbox.faults_for("shipment") == ["lose_response"]
    assert cases["out-of-stock"].reserve.sku == "SKU-EMPTY"
    stuck = cases["compensation-stuck"].sandbox
    assert stuck.faults_for("shipment") == ["reject"]
    assert len(stuck.faults_for("release")) >= 5
    assert set(stuck.faults_for("release")) == {"timeout"}
