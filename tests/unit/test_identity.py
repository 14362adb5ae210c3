import pytest

from saga.errors import KeyConflict, OutOfStock, SagaError, error_from_record
from saga.identity import (
    Operation,
    action_id_for,
    action_key,
    canonical_json,
    parse_action_key,
    request_digest,
)


def test_action_key_is_tenant_operation_action_id() -> None:
    key = action_key("acme", Operation.REFUND, action_id_for("case-1", Operation.REFUND))
    assert key == "acme#refund#case-1.refund"
    assert parse_action_key(key) == ("acme", "refund", "case-1.refund")


def test_action_key_refuses_separator_in_components() -> None:
    with pytest.raises(ValueError, match="invalid action key component"):
        action_key("ac#me", Operation.REFUND, "x")


def test_release_has_no_forward_action_id() -> None:
    with pytest.raises(ValueError, match="compensates"):
        action_id_for("case-1", Operation.RELEASE)


def test_two_cases_with_identical_refunds_are_two_actions() -> None:
    a = action_key("acme", Operation.REFUND, action_id_for("case-1", Operation.REFUND))
    b = action_key("acme", Operation.REFUND, action_id_for("case-2", Operation.REFUND))
    params = {"amount_minor": 2000, "currency": "USD"}
    assert a != b
    assert request_digest(params, 1) == request_digest(dict(reversed(params.items())), 1)


def test_canonical_json_sorted_compact_and_float_free() -> None:
    assert canonical_json({"b": 1, "a": [2, {"d": 1, "c": 2}]}) == '{"a":[2,{"c":2,"d":1}],"b":1}'
    with pytest.raises(TypeError, match="minor units"):
        canonical_json({"amount": 20.0})


def test_digest_changes_with_parameters_and_revision() -> None:
    base = request_digest({"amount_minor": 2000}, 1)
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    assert request_digest({"amount_minor": 2001}, 1) != base
    assert request_digest({"amount_minor": 2000}, 2) != base


def test_recorded_errors_rebuild_with_type_and_message() -> None:
    err = error_from_record(OutOfStock("only 0 of SKU-1 left").to_record())
    assert isinstance(err, OutOfStock) and err.message == "only 0 of SKU-1 left"
    assert type(error_from_record({"type": "KeyConflict", "message": "m"})) is KeyConflict
    assert type(error_from_record({"type": "NoSuchError", "message": "m"})) is SagaError
