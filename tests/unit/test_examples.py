"""Every ready example case parses, is approved (digest verifies) and has its own case id; the
Stripe ones (examples/stripe/) refund payments the local Stripe server makes for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saga.models import Case, parse_case, verify_approval

EXAMPLES_DIR = Path(__file__).parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))
STRIPE_EXAMPLES = sorted((EXAMPLES_DIR / "stripe").glob("*.json"))
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


@pytest.mark.parametrize(
    "path", EXAMPLES + STRIPE_EXAMPLES, ids=lambda path: str(path.relative_to(EXAMPLES_DIR))
)
def test_example_parses_and_its_digest_verifies(path: Path) -> None:
    case = load(path)
    verify_approval(case)
    tenant, approvers = FOUR_EYES.get(path.stem, ("acme", ("supervisor@acme",)))
    assert case.tenant_id == tenant
    assert case.signed_approvals().approvers() == approvers


def test_examples_have_distinct_case_ids() -> None:
    ids = [load(path).case_id for path in EXAMPLES + STRIPE_EXAMPLES]
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


def test_each_stripe_example_refunds_a_payment_the_local_stripe_server_makes() -> None:
    """`sagactl local up --payments stripe` seeds one payment per Stripe example, in its
    currency, with more than its refund to give: examples/stripe/ runs as it is."""
    from local_aws.stripe.wiring import SEEDED_PAYMENTS

    cases = {path.stem: load(path) for path in STRIPE_EXAMPLES}
    assert sorted(c.refund.payment_reference for c in cases.values()) == sorted(SEEDED_PAYMENTS)
    for case in cases.values():
        amount, currency, _ = SEEDED_PAYMENTS[case.refund.payment_reference]
        assert (currency, case.refund.currency) == ("USD", "USD")
        assert amount > case.refund.amount_minor
    disputed = {pi for pi, (_, _, is_disputed) in SEEDED_PAYMENTS.items() if is_disputed}
    assert disputed == {cases["refund-disputed"].refund.payment_reference}
    assert cases["happy-path"].sandbox.faults_for("refund") == []
    assert cases["lost-refund-response"].sandbox.faults_for("refund") == ["lose_response"]
    assert cases["refund-in-flight"].sandbox.faults_for("refund") == ["in_flight"]
    assert cases["stripe-unavailable"].sandbox.faults_for("refund") == ["unavailable"]
