"""Fast tests of the ledger's pure parts and error mapping (no AWS, no moto)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from saga.dynamodb import client_request_token
from saga.dynamodb import number as _n
from saga.dynamodb import plain as _from_dynamo
from saga.dynamodb import to_attr as _to_dynamo
from saga.errors import ActionPending, OutOfStock, SagaError, TransientError
from saga.ledger import (
    Absent,
    ActionLedger,
    ActionRequest,
    Attempt,
    Decision,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
    PowertoolsObserver,
    decide,
)

NOW = 1_700_000_000.0
DIGEST = "sha256:aaa"


def record(**overrides: Any) -> LedgerRecord:
    values: dict[str, Any] = {
        "action_key": "acme#refund#case-1.refund",
        "status": LedgerStatus.IN_PROGRESS,
        "request_digest": DIGEST,
        "owner": "other",
        "lease_expires_at": NOW + 60,
        "attempts": 1,
        "result": None,
        "error": None,
        "downstream_ref": None,
        "business_ref": "case-1.refund",
        "case_id": "case-1",
        "execution_arn": None,
        "compensates": None,
        "created_at": NOW,
        "updated_at": NOW,
        "expires_at": int(NOW) + 86400,
    }
    values.update(overrides)
    return LedgerRecord(**values)


def decision(
    rec: LedgerRecord, *, digest: str = DIGEST, me: str = "me", budget: int = 3
) -> Decision:
    return decide(rec, digest=digest, attempt_id=me, now=NOW, budget=budget)


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        (record(request_digest="sha256:bbb"), Decision.CONFLICT),
        (record(status=LedgerStatus.COMPLETED, request_digest="sha256:bbb"), Decision.CONFLICT),
        (record(status=LedgerStatus.COMPLETED), Decision.REPLAYED),
        (record(status=LedgerStatus.FAILED), Decision.RECORDED_FAILURE),
        (record(owner="me"), Decision.OWN_CLAIM),
        (record(), Decision.PENDING),
        (record(lease_expires_at=NOW), Decision.TAKEOVER),  # a lease ending now is expired
        (record(status=LedgerStatus.UNKNOWN, lease_expires_at=NOW + 999), Decision.TAKEOVER),
        (record(owner=None, lease_expires_at=NOW), Decision.RESUME_RELEASED),
        # a closed record says what happened, past its retention too
        (record(status=LedgerStatus.COMPLETED, expires_at=int(NOW)), Decision.REPLAYED),
        (record(status=LedgerStatus.FAILED, expires_at=int(NOW)), Decision.RECORDED_FAILURE),
        # an open one past its retention is taken over and looked up first
        (record(expires_at=int(NOW) - 1, lease_expires_at=NOW - 5), Decision.LATE_REPLAY),
        (record(owner=None, lease_expires_at=NOW, expires_at=int(NOW)), Decision.LATE_REPLAY),
        # a given-back lease resumes without a lookup only if no delivery may have sent
        (record(owner=None, lease_expires_at=NOW, first_dispatch_at=NOW - 9), Decision.TAKEOVER),
        (record(owner=None, lease_expires_at=NOW, legacy=True), Decision.TAKEOVER),
        # reconciliation escalated it: no delivery acts on it any more
        (record(status=LedgerStatus.UNKNOWN, escalated_at=NOW - 1), Decision.ESCALATED),
        (record(owner=None, lease_expires_at=NOW, escalated_at=NOW - 1), Decision.ESCALATED),
        (record(lease_expires_at=NOW - 1, attempts=3), Decision.BUDGET_EXHAUSTED),
        (record(status=LedgerStatus.UNKNOWN, attempts=3), Decision.BUDGET_EXHAUSTED),
        (record(owner=None, attempts=3), Decision.BUDGET_EXHAUSTED),
        # a live lease is pending even with the budget spent: its owner may still finish
        (record(attempts=3), Decision.PENDING),
        # completed actions replay whatever the attempt count
        (record(status=LedgerStatus.COMPLETED, attempts=3), Decision.REPLAYED),
    ],
)
def test_decision_table_rows(rec: LedgerRecord, expected: Decision) -> None:
    assert decision(rec) is expected


SETTLED = {"by": "ops@acme", "decision": "refunded by hand", "at": "2023-11-14T22:13:20Z"}


@pytest.mark.parametrize(
    "rec",
    [
        record(status=LedgerStatus.UNKNOWN, owner=None, lease_expires_at=NOW - 5),
        record(owner=None, lease_expires_at=NOW - 5),  # released: would resume without a lookup
        record(status=LedgerStatus.UNKNOWN, attempts=3),  # would be budget exhausted
        record(status=LedgerStatus.UNKNOWN, expires_at=0),  # settled records do not expire
        record(owner="me"),  # even "our own claim" (a person saw the lease end first)
    ],
)
def test_a_settled_record_is_never_delivered_again(rec: LedgerRecord) -> None:
    settled = LedgerRecord(**{**rec.__dict__, "resolution": SETTLED})
    assert decision(settled) is Decision.SETTLED
    # Same key, other parameters: still the conflict it always was.
    assert decision(settled, digest="sha256:bbb") is Decision.CONFLICT


def test_policy_sizes_leases_and_rejects_nonsense() -> None:
    policy = LedgerPolicy(lease_margin_seconds=30, min_lease_seconds=5)
    assert policy.lease_seconds(60.0) == 90.0
    assert LedgerPolicy(lease_margin_seconds=0, min_lease_seconds=5).lease_seconds(1.0) == 5.0
    with pytest.raises(ValueError, match="attempt_budget"):
        LedgerPolicy(attempt_budget=0)
    with pytest.raises(ValueError, match="retention"):
        LedgerPolicy(retention_seconds=0)


def test_numbers_are_plain_millisecond_decimals() -> None:
    assert _n(1000.0) == {"N": "1000"}
    assert _n(1_700_000_000.1234) == {"N": "1700000000.123"}
    assert _n(0.0) == {"N": "0"}


def test_results_round_trip_without_decimal_drift() -> None:
    result = {"refund_id": "rf-1", "amount": 2000, "rate": 0.5, "lines": [1, {"a": True}]}
    stored = _to_dynamo(result)
    assert stored["M"]["amount"] == {"N": "2000"}
    from boto3.dynamodb.types import TypeDeserializer

    assert _from_dynamo(TypeDeserializer().deserialize(stored)) == result


def test_client_request_token_fits_dynamodb_limit_and_names_one_body() -> None:
    body: list[Any] = [{"Put": {"TableName": "t" * 200, "Item": {"k": {"S": "v"}}}}]
    token = client_request_token(body)
    assert len(token) == 36 and token.isalnum()
    assert client_request_token(json.loads(json.dumps(body))) == token  # same body, same token
    other = [{"Put": {"TableName": "t" * 200, "Item": {"k": {"S": "w"}}}}]
    assert client_request_token(other) != token  # another body never reuses it


def _stubbed_ledger() -> tuple[ActionLedger, Stubber]:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    stubber = Stubber(client)
    return ActionLedger("ledger", client, LedgerPolicy(), clock=lambda: NOW), stubber


REQUEST = ActionRequest("acme", "reserve", "case-1.reserve", DIGEST, "case-1")


def _transact(ledger: ActionLedger) -> Any:
    def explain(failed: Mapping[int, dict[str, Any]]) -> SagaError:
        return OutOfStock(f"item {min(failed)}")

    return ledger.execute_transaction(
        REQUEST, Attempt("a1", 10), effect_items=[], result={}, explain_failure=explain
    )


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        ("TransactionInProgressException", ActionPending, "in flight"),
        ("ThrottlingException", TransientError, "ThrottlingException"),
    ],
)
def test_transaction_errors_map_to_typed_errors(
    code: str, error: type[Exception], message: str
) -> None:
    ledger, stubber = _stubbed_ledger()
    stubber.add_client_error("transact_write_items", service_error_code=code)
    with stubber, pytest.raises(error, match=message):
        _transact(ledger)


def test_cancelled_transaction_without_condition_failure_is_transient() -> None:
    ledger, stubber = _stubbed_ledger()
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        response_meta={},
        modeled_fields={"CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}]},
    )
    with stubber, pytest.raises(TransientError, match="TransactionConflict"):
        _transact(ledger)


def test_powertools_observer_logs_keys_and_emits_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from saga.observability import metrics

    metrics.clear_metrics()
    observer = PowertoolsObserver()
    observer.on_decision("claimed", REQUEST, record(status=LedgerStatus.IN_PROGRESS))
    observer.on_decision("late_replay", REQUEST, None)

    logged = [r for r in caplog.records if r.getMessage().startswith("ledger decision")]
    assert [r.decision for r in logged] == ["claimed", "late_replay"]  # type: ignore[attr-defined]
    first = logged[0].__dict__
    assert (first["action_key"], first["case_id"], first["status"]) == (
        REQUEST.key,
        "case-1",
        "IN_PROGRESS",
    )
    emitted = metrics.serialize_metric_set()
    names = {m["Name"] for m in emitted["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {"ActionClaimed", "LateReplay"}
    metrics.clear_metrics()


def test_unreachable_ledger_on_claim_is_transient_and_dispatches_nothing() -> None:
    ledger, stubber = _stubbed_ledger()
    stubber.add_client_error(
        "put_item", service_error_code="ProvisionedThroughputExceededException"
    )
    calls: list[str] = []

    def effect() -> Any:
        calls.append("refund")
        raise AssertionError("must not dispatch")

    with stubber, pytest.raises(TransientError, match="ledger write for acme#reserve#case-1"):
        ledger.execute(REQUEST, Attempt("a1", 10), effect=effect, reconcile=Absent)
    assert calls == []


def test_outcome_that_cannot_be_recorded_is_outcome_unknown() -> None:
    from saga.errors import OutcomeUnknown
    from saga.ledger import EffectResult

    ledger, stubber = _stubbed_ledger()
    stubber.add_response("put_item", {})
    stubber.add_client_error("update_item", service_error_code="InternalServerError")
    calls: list[str] = []

    def effect() -> EffectResult:
        calls.append("refund")
        return EffectResult({"refund_id": "rf-1"})

    with stubber, pytest.raises(OutcomeUnknown, match="could not be recorded"):
        ledger.execute(REQUEST, Attempt("a1", 10), effect=effect, reconcile=Absent)
    assert calls == ["refund"]


def test_transaction_token_differs_per_delivery_so_a_retry_is_decided_by_the_ledger() -> None:
    """Each delivery writes other items (owner, timestamps). DynamoDB rejects a token reused with
    other items inside 10 minutes (IdempotentParameterMismatch), so a workflow retry after a lost
    commit must not reuse the first delivery's token: the ledger condition decides instead."""

    class RecordingClient:
        tokens: list[str] = []

        def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
            self.tokens.append(kwargs["ClientRequestToken"])
            return {}

    client = RecordingClient()
    ledger = ActionLedger("ledger", client, LedgerPolicy(), clock=lambda: NOW)  # type: ignore[arg-type]
    for attempt_id in ("a1", "a1", "a2"):
        ledger.execute_transaction(
            REQUEST,
            Attempt(attempt_id, 10),
            effect_items=[],
            result={},
            explain_failure=lambda failed: OutOfStock("x"),
        )
    first, same_delivery, next_delivery = client.tokens
    assert first == same_delivery  # an SDK retry of one delivery stays idempotent
    assert first != next_delivery
    assert all(len(token) <= 36 for token in client.tokens)


def test_token_mismatch_is_decided_from_the_record_not_a_key_conflict() -> None:
    ledger, stubber = _stubbed_ledger()
    stubber.add_client_error(
        "transact_write_items", service_error_code="IdempotentParameterMismatchException"
    )
    completed = {
        "action_key": {"S": REQUEST.key},
        "status": {"S": "COMPLETED"},
        "request_digest": {"S": DIGEST},
        "attempts": {"N": "1"},
        "result": {"M": {"reservation_id": {"S": "r-1"}}},
        "expires_at": {"N": str(int(NOW) + 86400)},
    }
    stubber.add_response("get_item", {"Item": completed})
    with stubber:
        outcome = _transact(ledger)
    assert outcome.replayed and outcome.result == {"reservation_id": "r-1"}


def test_a_lease_that_cannot_be_given_up_keeps_the_transient_error() -> None:
    """The effect said "nothing happened"; if the ledger then cannot release the lease, the
    delivery still fails as TransientError (retryable), not as a raw ClientError: the lease runs
    out and the next delivery takes over and reconciles first."""
    ledger, stubber = _stubbed_ledger()
    stubber.add_response("put_item", {})
    stubber.add_client_error("update_item", service_error_code="InternalServerError")

    def effect() -> Any:
        raise TransientError("carrier refused the connection")

    with stubber, pytest.raises(TransientError, match="carrier refused the connection"):
        ledger.execute(REQUEST, Attempt("a1", 10), effect=effect, reconcile=Absent)
    stubber.assert_no_pending_responses()


def test_an_unwritable_reconcile_record_is_transient() -> None:
    from saga.ledger import Found

    ledger, stubber = _stubbed_ledger()
    stubber.add_response("get_item", {})  # no record yet
    stubber.add_client_error("put_item", service_error_code="InternalServerError")

    with stubber, pytest.raises(TransientError, match="ledger write for acme#reserve#case-1"):
        ledger.reconcile(
            REQUEST, Attempt("a1", 10), reconcile=lambda: Found({"reservation_id": "r"})
        )
