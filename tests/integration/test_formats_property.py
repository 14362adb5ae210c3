"""Property: every case that ValidateCase accepts is accepted for format by the sandbox payment
provider and the sandbox carrier (issue 9.3), so no case is refunded and then refused for its
address. The strategies mix valid values with the near misses a person or a model writes:
blank and whitespace-only text, unicode, control characters, long lines, made-up codes."""

from __future__ import annotations

import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_aws.tables import StackTables
from saga.errors import InvalidRequest
from saga.formats import COUNTRY_CODES, CURRENCY_CODES
from saga.models import Case, parse_case, with_approval_digest
from saga.ports import DownstreamRejected
from saga.sandbox.carrier import SandboxCarrierService
from saga.sandbox.faults import FaultInjector
from saga.sandbox.payments import SandboxPaymentsService
from tests.tables import SandboxTables
from tests.tools_harness import raw_case

TABLES = SandboxTables()
accepted: list[int] = []


@pytest.fixture(scope="module", autouse=True)
def enough_accepted_cases() -> Iterator[None]:
    """The property is only worth something if many generated cases were accepted."""
    accepted.clear()
    yield
    assert len(accepted) >= 50, f"only {len(accepted)} generated cases passed validation"


def mostly(valid: st.SearchStrategy[str], near_miss: st.SearchStrategy[str]) -> Any:
    """Valid seven times in eight, so that enough whole cases pass to test the property."""
    return st.integers(0, 7).flatmap(lambda pick: valid if pick else near_miss)


printable = st.characters(codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn"))
text = mostly(
    st.one_of(
        st.text(alphabet=string.ascii_letters + " .-'", min_size=1, max_size=35),
        st.sampled_from(["Ada Li", "1 Main St", "Zürich", "東京都", "São Paulo", "  Ada  "]),
        st.text(alphabet=printable, min_size=1, max_size=35).filter(str.strip),
    ),
    st.one_of(
        st.text(alphabet=string.whitespace, max_size=5),
        st.text(min_size=36, max_size=60),
        st.text(min_size=1, max_size=35),  # any unicode: control characters, separators
    ),
)
postal_code = mostly(
    st.one_of(
        st.from_regex(r"[A-Z0-9]{1,5}[ -]?[A-Z0-9]{1,4}", fullmatch=True),
        st.sampled_from(["12345", "SW1A 1AA", "10115", "100-0001"]),
    ),
    st.one_of(st.text(max_size=12), st.sampled_from([" 12345", "12345-", "1234567890123"])),
)
country = mostly(
    st.sampled_from(sorted(COUNTRY_CODES)), st.text(string.ascii_letters, min_size=1, max_size=3)
)
currency = mostly(
    st.sampled_from(sorted(CURRENCY_CODES)),
    st.one_of(
        st.text(string.ascii_uppercase, min_size=2, max_size=4),
        st.sampled_from(["XAU", "XTS", "HRK", "usd"]),
    ),
)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """A case with generated parameters; the approval digest is filled in by the test (the
    approval step validates the parameters first, exactly as `sagactl case approve` does)."""
    base = raw_case()
    return {
        **base,
        "shipment": {
            "address": {
                "name": draw(text),
                "line1": draw(text),
                "city": draw(text),
                "postal_code": draw(postal_code),
                "country": draw(country),
            }
        },
        "refund": {
            "payment_reference": "pay-777",
            "amount_minor": draw(st.integers(min_value=1, max_value=100_000_000)),
            "currency": draw(currency),
        },
    }


@pytest.fixture(scope="module")
def downstreams(
    stack_tables: StackTables,
) -> Iterator[tuple[SandboxPaymentsService, SandboxCarrierService, FaultInjector, FaultInjector]]:
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            patch.delenv(name, raising=False)
        import boto3

        client = boto3.client("dynamodb", region_name="us-east-1")
        stack_tables.create(client, TABLES.outputs())
        payments = SandboxPaymentsService(
            client, payments_table=TABLES.payments, sandbox_table=TABLES.sandbox
        )
        carrier = SandboxCarrierService(
            client, shipments_table=TABLES.shipments, sandbox_table=TABLES.sandbox
        )
        no_faults = FaultInjector(client, TABLES.sandbox, "c", "refund", ())
        no_carrier_faults = FaultInjector(client, TABLES.sandbox, "c", "shipment", ())
        yield payments, carrier, no_faults, no_carrier_faults


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=cases())
def test_a_case_validation_accepts_is_accepted_by_every_downstream(
    raw: dict[str, Any], downstreams: Any
) -> None:
    try:
        case: Case = parse_case(with_approval_digest(raw))
    except InvalidRequest:
        return  # refused before any effect: nothing to check
    accepted.append(1)
    payments, carrier, refund_faults, shipment_faults = downstreams
    key = f"acme#refund#{case.case_id}.refund#{len(accepted)}"
    response = payments.create_refund(
        idempotency_key=key,
        case_id=case.case_id,
        business_ref=key,
        payment_reference=case.refund.payment_reference,
        amount_minor=case.refund.amount_minor,
        currency=case.refund.currency,
        faults=refund_faults,
    )
    assert response.ok, response.body
    try:
        carrier.create_shipment(
            case_id=case.case_id,
            business_ref=key,
            address=case.shipment.address.model_dump(mode="json"),
            sku=case.reserve.sku,
            quantity=case.reserve.quantity,
            faults=shipment_faults,
        )
    except DownstreamRejected as exc:  # pragma: no cover - the failure this test looks for
        pytest.fail(f"the carrier refused an accepted case: {exc}")
