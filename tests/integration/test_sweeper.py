"""The stuck-action sweeper against moto: real ledger records, the real open-actions index."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from saga import clock as saga_clock
from saga.errors import OutcomeUnknown
from saga.ledger import ActionLedger, ActionRequest, Attempt, EffectResult, Found, LedgerPolicy
from saga.settings import ConfigurationError, SweepStuckActionsEnvironment
from saga.tools.sweeper import MAX_RESEND_GAP_SECONDS, StuckActionSweeper, resend_due
from tests.integration.ledger_harness import FakeClock, refund_request
from tests.local_clock import local_clock
from tests.queues import drain

__all__ = ["local_clock"]

GRACE = 300
EVERY = 300  # the sweep interval
LEASE_SECONDS = 60.0


class WorkerCrashed(BaseException):
    """A Lambda that died mid-effect: nothing after the claim runs, the lease stays."""


def _crash() -> EffectResult:
    raise WorkerCrashed


def _lose_response() -> EffectResult:
    raise OutcomeUnknown("the provider timed out")


def _succeed() -> EffectResult:
    return EffectResult({"refund_id": "re-1"}, "re-1")


def _never_reconciled() -> Found:
    raise AssertionError("no reconciliation in these tests")


def _run(ledger: ActionLedger, request: ActionRequest, effect: Any, owner: str) -> None:
    attempt = Attempt(attempt_id=owner, remaining_seconds=LEASE_SECONDS)
    with contextlib.suppress(WorkerCrashed, OutcomeUnknown):
        ledger.execute(request, attempt, effect=effect, reconcile=_never_reconciled)


@pytest.fixture
def queue_url(moto_aws: None) -> str:
    return str(boto3.client("sqs").create_queue(QueueName="escalation")["QueueUrl"])


@pytest.fixture
def sweeper(
    dynamodb: Any, ledger_table: str, queue_url: str, clock: FakeClock
) -> StuckActionSweeper:
    return sweeper_over(dynamodb, ledger_table, queue_url, clock)


def sweeper_over(
    dynamodb: Any, ledger_table: str, queue_url: str, clock: FakeClock, page_size: int | None = None
) -> StuckActionSweeper:
    """The sweeper of this ledger table, escalating to this queue after GRACE."""
    return StuckActionSweeper(
        dynamodb=dynamodb,
        sqs=boto3.client("sqs"),
        ledger_table=ledger_table,
        escalation_queue_url=queue_url,
        grace_seconds=GRACE,
        clock=clock,
        page_size=page_size,
    )


def _messages(queue_url: str) -> list[dict[str, Any]]:
    return drain(boto3.client("sqs"), queue_url)


def test_only_actions_stuck_past_lease_and_grace_are_escalated_once_each(
    ledger: ActionLedger, sweeper: StuckActionSweeper, clock: FakeClock, queue_url: str
) -> None:
    crashed = refund_request("case-crashed")
    unknown = refund_request("case-unknown")
    done = refund_request("case-done")
    _run(ledger, crashed, _crash, "attempt-crashed")
    _run(ledger, unknown, _lose_response, "attempt-unknown")
    _run(ledger, done, _succeed, "attempt-done")

    # Still within the lease (crashed) and the grace period (unknown): nothing is stuck yet.
    assert sweeper.sweep().stuck == ()
    assert _messages(queue_url) == []

    clock.advance(LEASE_SECONDS + GRACE + 60)
    recent = refund_request("case-recent-unknown")
    _run(ledger, recent, _lose_response, "attempt-recent")  # UNKNOWN, but only just

    report = sweeper.sweep()
    assert sorted(a.action_key for a in report.stuck) == sorted([crashed.key, unknown.key])
    assert report.escalated == 2
    by_key = {a.action_key: a for a in report.stuck}
    assert by_key[crashed.key].status == "IN_PROGRESS"
    assert by_key[crashed.key].owner == "attempt-crashed"
    assert by_key[unknown.key].status == "UNKNOWN"
    assert by_key[unknown.key].attempts == 1

    messages = _messages(queue_url)
    assert sorted(m["action_key"] for m in messages) == sorted([crashed.key, unknown.key])
    for message in messages:
        assert message["kind"] == "STUCK_ACTION"
        assert message["case_id"] in {"case-crashed", "case-unknown"}
        assert message["escalation_id"].startswith(message["action_key"] + "@")
        assert message["stuck_seconds"] > GRACE
    assert report.summary()["by_status"] == {"IN_PROGRESS": 1, "UNKNOWN": 1}


def test_a_resolved_action_leaves_the_index_and_is_not_escalated_again(
    ledger: ActionLedger,
    sweeper: StuckActionSweeper,
    clock: FakeClock,
    queue_url: str,
) -> None:
    request = refund_request("case-resolved")
    _run(ledger, request, _lose_response, "attempt-1")
    clock.advance(GRACE + 1)
    first = sweeper.sweep()
    assert [a.action_key for a in first.stuck] == [request.key]
    # Reconciliation finds the refund: the record becomes COMPLETED and loses open_status.
    decision = ledger.reconcile(
        request,
        Attempt(attempt_id="reconciler", remaining_seconds=LEASE_SECONDS),
        reconcile=lambda: Found({"refund_id": "re-9"}, "re-9"),
    )
    assert decision.decision == "RESUME"
    assert sweeper.sweep().stuck == ()
    assert len(_messages(queue_url)) == 1


class _IndexAsItWas:
    """The ledger client, but its open-actions index answers as it did when `freeze` ran: an
    index that has not caught up yet (a GSI is eventually consistent; moto's never lags)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pages: dict[str, dict[str, Any]] | None = None

    def query(self, **request: Any) -> dict[str, Any]:
        status = request["ExpressionAttributeValues"][":status"]["S"]
        if self._pages is None:
            return dict(self._client.query(**request))
        return self._pages.get(status, {"Items": []})

    def freeze(self, sweeper: StuckActionSweeper) -> None:
        pages: dict[str, dict[str, Any]] = {}
        original = self._client.query

        def recording(**request: Any) -> dict[str, Any]:
            page = dict(original(**request))
            pages[request["ExpressionAttributeValues"][":status"]["S"]] = page
            return page

        self._client.query = recording
        try:
            sweeper.find_stuck()
        finally:
            del self._client.query
        self._pages = pages

    def indexed_keys(self) -> list[str]:
        pages = (self._pages or {}).values()
        return [item["action_key"]["S"] for page in pages for item in page["Items"]]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("moved_on", ["reconciled", "found in doubt by a new attempt"])
def test_an_action_the_index_still_shows_but_that_moved_on_is_not_stuck(  # noqa: PLR0917
    ledger: ActionLedger,
    dynamodb: Any,
    ledger_table: str,
    queue_url: str,
    clock: FakeClock,
    moved_on: str,
) -> None:
    lagging = _IndexAsItWas(dynamodb)
    sweeper = sweeper_over(lagging, ledger_table, queue_url, clock)
    request = refund_request("case-moved-on")
    reconciled = moved_on == "reconciled"
    _run(ledger, request, _lose_response if reconciled else _crash, "attempt-1")
    clock.advance(LEASE_SECONDS + GRACE + 60)
    lagging.freeze(sweeper)  # the index's copy: open, stuck past its lease and the grace
    assert lagging.indexed_keys() == [request.key]
    if reconciled:
        ledger.reconcile(
            request,
            Attempt(attempt_id="reconciler", remaining_seconds=LEASE_SECONDS),
            reconcile=lambda: Found({"refund_id": "re-9"}, "re-9"),
        )
    else:  # the next attempt finds the lease over: UNKNOWN since now, within the grace
        _run(ledger, request, _succeed, "attempt-2")
    current = ledger.get(request.key)
    assert current is not None
    assert current.status == ("COMPLETED" if reconciled else "UNKNOWN")

    report = sweeper.sweep()

    assert report.stuck == ()
    assert _messages(queue_url) == []


def test_many_stuck_actions_are_read_across_pages(
    ledger: ActionLedger, dynamodb: Any, ledger_table: str, queue_url: str, clock: FakeClock
) -> None:
    requests = [refund_request(f"case-{n:03d}") for n in range(12)]
    for request in requests:
        _run(ledger, request, _lose_response, f"attempt-{request.case_id}")
    clock.advance(GRACE + 1)
    paged = sweeper_over(dynamodb, ledger_table, queue_url, clock, page_size=5)
    report = paged.sweep()
    assert sorted(a.action_key for a in report.stuck) == sorted(r.key for r in requests)
    assert len(_messages(queue_url)) == 12


class SweepContext(LambdaContext):
    _function_name = "sweep"
    _memory_limit_in_mb = 128
    _invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:sweep"
    _aws_request_id = "req-1"


def _sweeper_environment(
    monkeypatch: pytest.MonkeyPatch, ledger_table: str, queue_url: str
) -> None:
    """SweepStuckActionsFunction's environment, as the stack renders it, for this table."""
    monkeypatch.setenv("LEDGER_TABLE", ledger_table)
    monkeypatch.setenv("ESCALATION_QUEUE_URL", queue_url)
    monkeypatch.setenv("STUCK_GRACE_SECONDS", str(GRACE))
    monkeypatch.setenv("SWEEP_EVERY_SECONDS", str(EVERY))
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ReplacementOrderSaga-test")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "sweep-stuck-actions")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "INFO")


def _stuck_actions_metric(printed: str) -> list[Any]:
    """The StuckActions values in what the handler printed (CloudWatch embedded metric format)."""
    emitted = [json.loads(line) for line in printed.splitlines() if "_aws" in line]
    return [m["StuckActions"] for m in emitted if "StuckActions" in m]


def test_handler_emits_the_stuck_actions_metric_and_escalates(  # noqa: PLR0917
    ledger: ActionLedger,
    clock: FakeClock,
    ledger_table: str,
    queue_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from saga.handlers import sweep_stuck_actions

    clock.now = time.time() - GRACE - 10  # the handler sweeps on the real clock
    _run(ledger, refund_request("case-old"), _lose_response, "attempt-old")
    _sweeper_environment(monkeypatch, ledger_table, queue_url)
    capsys.readouterr()

    result = sweep_stuck_actions.handler({}, SweepContext())
    assert result["stuck"] == 1
    assert len(_messages(queue_url)) == result["escalated"] == 1  # just stuck: its first report
    stuck_metrics = _stuck_actions_metric(capsys.readouterr().out)
    assert stuck_metrics in ([1.0], [[1.0]])  # one sweep, one data point: 1 stuck action


def test_the_stuck_actions_metric_counts_every_stuck_action_on_every_sweep(  # noqa: PLR0917
    dynamodb: Any,
    ledger_table: str,
    policy: LedgerPolicy,
    queue_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    local_clock: Callable[[float], None],
) -> None:
    """Issue 41, item 2: the StuckActions metric (what its alarm watches) counts every stuck
    action on every sweep, those whose re-send is not due under the back-off included; a
    metric of what was re-sent would fall to 0 between re-sends and clear the alarm while the
    actions are still stuck. Eight sweeps, one interval apart, on the movable clock (the
    handler's and the ledger's): one action stuck from the first, a second from the fourth."""
    from saga.handlers import sweep_stuck_actions

    ledger = ActionLedger(ledger_table, dynamodb, policy, clock=saga_clock.now)
    _sweeper_environment(monkeypatch, ledger_table, queue_url)
    _run(ledger, refund_request("case-first"), _lose_response, "attempt-first")  # UNKNOWN at 0
    first_sweep = GRACE + 1
    metrics, escalated = [], []
    for sweep in range(8):
        local_clock(first_sweep + sweep * EVERY)
        capsys.readouterr()
        report = sweep_stuck_actions.handler({}, SweepContext())
        [value] = _stuck_actions_metric(capsys.readouterr().out)
        metrics.append(value[0] if isinstance(value, list) else value)
        escalated.append(report["escalated"])
        assert report["stuck"] == metrics[-1], report
        if sweep == 1:  # half an interval on, a second action becomes UNKNOWN: it is stuck
            local_clock(first_sweep + 1.5 * EVERY)  # from the fourth sweep on
            _run(ledger, refund_request("case-second"), _lose_response, "attempt-second")

    assert metrics == [1, 1, 1, 2, 2, 2, 2, 2]
    # The re-sends back off (first: 1, 1, 0, 1, 0, 0, 0, 1; second: 0, 0, 0, 1, 1, 0, 1, 0):
    # what was sent is not the metric.
    assert escalated == [1, 1, 0, 2, 1, 0, 1, 1]
    assert len(_messages(queue_url)) == sum(escalated)


SWEEPER_ENV = {
    "POWERTOOLS_SERVICE_NAME": "sweep-stuck-actions",
    "POWERTOOLS_METRICS_NAMESPACE": "ReplacementOrderSaga-test",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "LEDGER_TABLE": "ledger",
    "ESCALATION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/escalations",
    "SWEEP_EVERY_SECONDS": "300",
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"STUCK_GRACE_SECONDS": "300"}, 300),
        ({"STUCK_GRACE_SECONDS": "0"}, 0),
        ({"STUCK_GRACE_SECONDS": "90"}, 90),
    ],
)
def test_grace_seconds_from_env(raw: dict[str, str], expected: int) -> None:
    assert SweepStuckActionsEnvironment.from_env({**SWEEPER_ENV, **raw}).stuck_grace_seconds == (
        expected
    )


@pytest.mark.parametrize("raw", ["soon", "-1"])
def test_bad_grace_seconds_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="STUCK_GRACE_SECONDS must be"):
        SweepStuckActionsEnvironment.from_env({**SWEEPER_ENV, "STUCK_GRACE_SECONDS": raw})


def test_unset_grace_seconds_is_a_clear_error_not_a_default() -> None:
    """cdk.json's `monitoring.stuck_grace_seconds` reaches the sweeper through the stack only."""
    with pytest.raises(ConfigurationError, match="STUCK_GRACE_SECONDS is required"):
        SweepStuckActionsEnvironment.from_env(SWEEPER_ENV)


def test_the_re_send_schedule_backs_off_to_once_a_day() -> None:
    """Sweeps every 5 minutes over the 14 days a message is kept: about 22 reports of one
    stuck action instead of 4,032, the first at once, then after 1, 2, 4, ... intervals."""
    sweeps = [n * EVERY for n in range(14 * 86400 // EVERY)]
    reported = [t for t in sweeps if resend_due(t, every=EVERY)]
    assert reported[:6] == [0, EVERY, 3 * EVERY, 7 * EVERY, 15 * EVERY, 31 * EVERY]
    gaps = [later - earlier for earlier, later in itertools.pairwise(reported)]
    assert gaps == sorted(gaps) and max(gaps) <= MAX_RESEND_GAP_SECONDS
    assert gaps[-1] == MAX_RESEND_GAP_SECONDS  # once a day from the second day on
    assert 15 <= len(reported) <= 25
    # Each report time falls in exactly one sweep's interval, wherever the sweeps fall.
    for offset in (1, 100, EVERY - 1):
        shifted = [t for t in sweeps if resend_due(t + offset, every=EVERY)]
        assert len(shifted) in (len(reported) - 1, len(reported), len(reported) + 1)


def test_a_long_stuck_action_is_counted_by_every_sweep_and_reported_on_the_schedule(
    ledger: ActionLedger, sweeper: StuckActionSweeper, clock: FakeClock, queue_url: str
) -> None:
    request = refund_request("case-long-stuck")
    _run(ledger, request, _lose_response, "attempt-1")
    clock.advance(GRACE + 1)
    counted, reported = [], []
    for _ in range(8):  # stuck for 0, 1, ..., 7 sweep intervals
        report = sweeper.sweep()
        counted.append(len(report.stuck))
        reported.append(report.escalated)
        clock.advance(EVERY)
    assert counted == [1] * 8  # the StuckActions metric stays exact
    assert reported == [1, 1, 0, 1, 0, 0, 0, 1]
    assert len(_messages(queue_url)) == 4
    clock.advance(60 * 86400)  # two months later it is still there, still counted
    assert [a.action_key for a in sweeper.sweep().stuck] == [request.key]
