"""How the adapters read the provider's answers and DynamoDB failures (no AWS)."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from saga.ports import (
    DownstreamConflict,
    DownstreamKeyMismatch,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
)
from saga.ports.payments import RefundReceipt
from saga.sandbox.calls import classify_failure
from saga.sandbox.payment_keys import ProviderResponse
from saga.sandbox.payment_provider import _receipt_or_raise


def error(status: int, code: str, message: str = "m") -> ProviderResponse:
    return ProviderResponse(status, {"error": {"type": "t", "code": code, "message": message}})


def test_a_success_becomes_a_receipt() -> None:
    body = {
        "id": "re_1",
        "business_ref": "c.refund",
        "amount_minor": 2000,
        "currency": "USD",
        "status": "succeeded",
    }
    assert _receipt_or_raise(ProviderResponse(200, body, replayed=True)) == RefundReceipt(
        "re_1", "c.refund", 2000, "USD", "succeeded"
    )


@pytest.mark.parametrize(
    ("response", "error_type"),
    [
        (error(402, "refund_rejected", "declined"), DownstreamRejected),
        (error(400, "invalid", "currency: bad"), DownstreamRejected),
        (error(400, "idempotency_key_mismatch"), DownstreamKeyMismatch),
        (error(409, "idempotency_key_in_use"), DownstreamConflict),
        # A stored (replayed) server error: the provider could not say what happened.
        (error(500, "api_error"), DownstreamTimeout),
    ],
)
def test_errors_map_to_exactly_one_adapter_error(
    response: ProviderResponse, error_type: type[Exception]
) -> None:
    with pytest.raises(error_type) as caught:
        _receipt_or_raise(response)
    assert type(caught.value) is error_type


def test_a_rejection_carries_the_reason() -> None:
    with pytest.raises(DownstreamRejected) as caught:
        _receipt_or_raise(error(402, "refund_rejected", "declined by issuer"))
    assert caught.value.reason == "declined by issuer"
    assert caught.value.downstream == "refund"


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "TransactWriteItems")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (client_error("InternalServerError"), DownstreamTimeout),
        (ReadTimeoutError(endpoint_url="http://x"), DownstreamTimeout),
        (EndpointConnectionError(endpoint_url="http://x"), DownstreamNotDispatched),
        (client_error("ProvisionedThroughputExceededException"), DownstreamNotDispatched),
        (client_error("TransactionCanceledException"), DownstreamNotDispatched),
    ],
)
def test_write_failures_are_either_provably_nothing_or_unknown(
    exc: Exception, expected: type[Exception]
) -> None:
    failure = classify_failure(exc, downstream="shipment", action="create shipment r")
    assert type(failure) is expected
    assert failure.downstream == "shipment"


def test_a_malformed_request_is_a_bug_and_is_not_disguised() -> None:
    with pytest.raises(ParamValidationError):
        classify_failure(ParamValidationError(report="bad"), downstream="refund", action="x")
