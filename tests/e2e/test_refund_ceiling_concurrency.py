"""The daily refund ceiling under concurrency (docs/design.md §3.12), through the real state
machine in the local AWS.

The local DynamoDB serializes requests, so two transactions never conflict by themselves: the
cases run in the concurrent Lambda runtime (as `sagactl local up --lambda-concurrency N` runs
them: every invocation in a worker process of its own) and the campaign's DynamoDB nemesis
cancels the counter's transactions with TransactionConflict, as DynamoDB does when another
transaction holds the item. Cases of a tenant without four eyes (acme) start at once against
the day's headroom: exactly as many refunds as fit are made, the counter says so, every other
case escalates with REFUND_LIMIT_REACHED and the numbers, and none fails for contention (each
case's IssueRefund ran once: the conflicts were repeated inside the tool). A variant loses
answers (the counter's transaction applied and answered with an error, the refund's invocation
answered with an error after it ran) until every execution fails at IssueRefund, then redrives
them all: the same totals.

`make test` runs 4 cases against 14.00 USD of headroom; `make test-long` (SAGA_LONG_TESTS=1)
the issue's 32 against 100.00 USD.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import pytest

from fault_campaign import nemeses
from local_aws.approval_keys import sign_locally
from local_aws.emulator import (
    LocalServer,
    client_environment,
    retry_time_scale,
    set_retry_time_scale,
)
from local_aws.environment import LocalAws, StackSource
from local_aws.lambda_runtime import configure_runtime, current_runtime, restore_runtime
from local_aws.template import load_template
from sagactl.paths import EXAMPLES_DIR, PROJECT_ROOT
from tests.infra.synth import Synthesized, synthesize

AMOUNT = 700  # 7.00 USD each
WAIT_SECONDS = 900.0  # per execution, on a loaded 2-core machine: a bound, not a measurement
SECONDS_PER_DAY = 86_400
PAST_EVERY_LEASE_SECONDS = 600  # the longest lease: 180 s of function timeout + 10 s margin


@dataclass(frozen=True)
class Load:
    cases: int
    ceiling: int  # minor units of headroom: the day starts empty

    @property
    def refunds(self) -> int:
        return self.ceiling // AMOUNT


SMALL = Load(cases=4, ceiling=1_400)
ISSUE = Load(cases=32, ceiling=10_000)
long_campaign = pytest.mark.skipif(
    os.environ.get("SAGA_LONG_TESTS") != "1", reason="long: SAGA_LONG_TESTS=1 (make test-long)"
)
LOADS = [
    pytest.param(SMALL, id="4-cases"),
    pytest.param(
        ISSUE, id="32-cases", marks=[pytest.mark.slow, pytest.mark.timeout(3600), long_campaign]
    ),
]


@pytest.fixture(scope="module")
def with_ceiling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Synthesized]]:
    """The app synthesized per ceiling (acme, USD), as `cdk.json`'s `refund_ceilings` sets it."""
    cache: dict[str, Synthesized] = {}
    yield cache


def _synthesized(
    cache: dict[str, Synthesized], tmp_path_factory: pytest.TempPathFactory, ceiling: int
) -> Synthesized:
    key = str(ceiling)
    if key not in cache:
        cache[key] = synthesize(
            tmp_path_factory.mktemp(f"ceiling-{ceiling}"),
            {"refund_ceilings": {"acme": {"USD": ceiling}}, **ROOMY_TIMEOUTS},
        )
    return cache[key]


def _roomy_timeouts() -> dict[str, Any]:
    """cdk.json's timeouts, raised: every case's steps start cold at once, each in a process of
    its own on the test machine's cores, and 32 cold starts on 2 loaded cores outlast a task's
    25 s (States.Timeout at ValidateCase), a limit of the laptop, not of the rule. The pending
    retrier outlasts the longer lease, as the configuration requires."""
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    functions = {**context["functions"], "timeout_seconds": 180}
    workflow = {**context["workflow"], "lambda_task_timeout_seconds": 170}
    pending = {"IntervalSeconds": 20, "MaxAttempts": 12, "BackoffRate": 2.0, "MaxDelaySeconds": 90}
    retry = {**context["retry"], "pending": pending}
    return {
        "functions": functions,
        "workflow": workflow,
        "retry": retry,
        # The local AWS is one process answering every worker: a downstream call may wait
        # longer than cdk.json's 5 s for it.
        "downstream_timeout_seconds": 60,
    }


ROOMY_TIMEOUTS = _roomy_timeouts()


@pytest.fixture
def concurrent_local(local_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Provision a synthesized stack in a fresh local account, with Lambda's account concurrency
    raised to the number of cases (as `sagactl local up --lambda-concurrency N`)."""
    saved, scale = current_runtime(), retry_time_scale()
    opened: list[LocalAws] = []

    def open_local(synth: Synthesized, concurrency: int) -> LocalAws:
        source = StackSource(load_template(synth.template_path), synth.saga.stack.stack_name)
        local = LocalAws(server=local_server, source=source)
        local.reprovision()
        for name, value in client_environment(local.endpoint).items():
            monkeypatch.setenv(name, value)
        configure_runtime(
            local.endpoint, local.server.region, workers=True, concurrency=concurrency
        )
        if concurrency >= ISSUE.cases:
            # Retries wait their configured time: with many cases at once on a few cores a
            # delivery can outlive a lease, and the pending retrier must outlast it for real.
            set_retry_time_scale(1.0)
        opened.append(local)
        # Noon UTC on the next day: the cases' charges all fall on one UTC day, whenever the
        # test runs (the counter is per day; a run across midnight would have two).
        now = local.clock.now()
        local.clock.advance(SECONDS_PER_DAY - now % SECONDS_PER_DAY + SECONDS_PER_DAY / 2)
        return local

    try:
        yield open_local
    finally:
        restore_runtime(saved)
        set_retry_time_scale(scale)
        for local in opened:
            local.clock.reset()


def acme_case(number: int) -> dict[str, Any]:
    case = json.loads((EXAMPLES_DIR / "happy-path.json").read_text(encoding="utf-8"))
    case = deepcopy(case)
    case["case_id"] = f"case-ceiling-{number:03d}"
    case["order"]["order_id"] = f"ord-ceiling-{number:03d}"
    case["refund"] = {
        "payment_reference": f"pay-{number}",
        "amount_minor": AMOUNT,
        "currency": "USD",
    }
    return sign_locally(case)


def start_all(local: LocalAws, cases: list[dict[str, Any]]) -> list[str]:
    return [local.start_case(case) for case in cases]


def wait_all(local: LocalAws, arns: list[str]) -> list[dict[str, Any]]:
    return [local.wait_for_execution(arn, timeout_seconds=WAIT_SECONDS) for arn in arns]


def conflicts(count: int) -> dict[str, Any]:
    """The counter's first `count` transactions cancelled: TransactionConflict on its item."""
    return {
        "kind": "dynamodb",
        "table": "limits",
        "operation": "TransactWriteItems",
        "error": "conflict",
        "match": "acme#USD#",
        "count": count,
    }


def check_totals(local: LocalAws, arns: list[str], load: Load) -> None:
    """Exactly `load.refunds` refunds and shipments, the counter at their sum, every other case
    escalated with the reason and the numbers, its reservation released."""
    outputs = [json.loads(local.wait_for_execution(arn)["output"]) for arn in arns]
    completed = [o for o in outputs if o["outcome"] == "COMPLETED"]
    escalated = [o for o in outputs if o["outcome"] == "ESCALATED"]
    assert (len(completed), len(escalated)) == (load.refunds, load.cases - load.refunds)
    used = load.refunds * AMOUNT
    for output in escalated:
        escalation = output["escalation"]
        assert escalation["reason"] == "REFUND_LIMIT_REACHED", escalation
        # Every refusal met the day's total at its last multiple of 7.00 below the ceiling.
        assert escalation["limit"] == {
            "ceiling": load.ceiling,
            "used": used,
            "asked": AMOUNT,
            "currency": "USD",
            "day": escalation["limit"]["day"],
        }
        assert f"{used // 100}.00 USD ({used} minor units) of it is used" in escalation["detail"]
        assert [c["action_key"] for c in output["compensations"]] == [
            f"acme#release#{output['case_id']}.reserve"
        ]
        record = _item(local, "CasesTableName", {"case_id": output["case_id"]})
        assert record["outcome"] == "ESCALATED" and record["escalation"] == escalation
    dynamodb = local.client("dynamodb")
    payments = _scan(local, "PaymentsTableName")
    assert len(payments) == load.refunds
    assert sorted(p["case_id"] for p in payments) == sorted(o["case_id"] for o in completed)
    assert len(_scan(local, "ShipmentsTableName")) == load.refunds
    (counter,) = _scan(local, "LimitsTableName")
    assert (counter["counter_key"], counter["total"]) == (
        f"acme#USD#{escalated[0]['escalation']['limit']['day']}",
        used,
    )
    stock = dynamodb.get_item(
        TableName=local.outputs["InventoryTableName"],
        Key={"sku": {"S": "SKU-RED-MUG"}},
        ConsistentRead=True,
    )["Item"]
    assert int(stock["available"]["N"]) == 100 - load.refunds


def issue_refund_deliveries(local: LocalAws, arn: str) -> int:
    return sum(
        1
        for event in local.history(arn)
        if event["type"] == "TaskScheduled"
        and "IssueRefund" in event["taskScheduledEventDetails"]["parameters"]
    )


@pytest.mark.parametrize("load", LOADS)
def test_concurrent_cases_never_pass_the_ceiling_and_none_fails_for_contention(
    concurrent_local: Any,
    with_ceiling: dict[str, Synthesized],
    tmp_path_factory: pytest.TempPathFactory,
    load: Load,
) -> None:
    local = concurrent_local(_synthesized(with_ceiling, tmp_path_factory, load.ceiling), load.cases)
    cases = [acme_case(n) for n in range(load.cases)]
    injected = load.cases  # as many conflicts as cases: most charges meet at least one
    with nemeses.armed([conflicts(injected)], local.outputs, case_id="") as armed:
        arns = start_all(local, cases)
        descriptions = wait_all(local, arns)
    assert [d["status"] for d in descriptions] == ["SUCCEEDED"] * load.cases
    assert armed.fired.count("dynamodb:conflict:limits:TransactWriteItems") == injected
    check_totals(local, arns, load)
    # No case spent a workflow attempt on contention: IssueRefund was invoked once each.
    assert [issue_refund_deliveries(local, arn) for arn in arns] == [1] * load.cases


@pytest.mark.parametrize("load", LOADS)
def test_lost_answers_and_redrives_give_the_same_totals(
    concurrent_local: Any,
    with_ceiling: dict[str, Synthesized],
    tmp_path_factory: pytest.TempPathFactory,
    load: Load,
) -> None:
    """The counter's transactions applied and answered InternalServerError (the SDK repeats
    them with the same token: applied once), conflicts, and every answer of IssueRefund lost
    after it ran until its retries run out: every execution FAILED at IssueRefund, with its
    refund made or refused. Redriven, each replays what the ledger recorded."""
    local = concurrent_local(_synthesized(with_ceiling, tmp_path_factory, load.ceiling), load.cases)
    cases = [acme_case(n) for n in range(load.cases)]
    deliveries = 4 * load.cases  # 1 + the tool policy's 3 retries of each case's IssueRefund
    applied_unanswered = [
        # One transaction in four after the conflicts: the SDK's repeat of it (same token) is
        # answered from the first, applied once.
        {**conflicts(1), "error": "internal_after", "skip": load.cases // 2 + 4 * n}
        for n in range(load.cases // 4)
    ]
    lost = [
        conflicts(load.cases // 2),
        *applied_unanswered,
        {
            "kind": "invoke_error",
            "tool": "IssueRefund",
            "error": "Lambda.ServiceException",
            "count": deliveries,
        },
    ]
    with nemeses.armed(lost, local.outputs, case_id="") as armed:
        arns = start_all(local, cases)
        failed = wait_all(local, arns)
    assert [d["status"] for d in failed] == ["FAILED"] * load.cases
    assert armed.fired.count("invoke:Lambda.ServiceException:IssueRefund") == deliveries
    assert armed.fired.count("dynamodb:internal_after:limits:TransactWriteItems") > 0
    assert len(_scan(local, "PaymentsTableName")) <= load.refunds
    # Time passes before anyone redrives: every lease a lost delivery held has ended.
    local.clock.advance(PAST_EVERY_LEASE_SECONDS)
    sfn = local.client("stepfunctions")
    for arn in arns:
        sfn.redrive_execution(executionArn=arn)
    redriven = wait_all(local, arns)
    assert [d["status"] for d in redriven] == ["SUCCEEDED"] * load.cases
    check_totals(local, arns, load)


# --- reading the local account -------------------------------------------------------------------
def _scan(local: LocalAws, output: str) -> list[dict[str, Any]]:
    from saga.dynamodb import from_item

    dynamodb = local.client("dynamodb")
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(
        TableName=local.outputs[output], ConsistentRead=True
    ):
        items.extend(from_item(item) for item in page["Items"])
    return items


def _item(local: LocalAws, output: str, key: dict[str, str]) -> dict[str, Any]:
    from saga.dynamodb import read_item

    item = read_item(local.client("dynamodb"), local.outputs[output], key)
    assert item is not None, key
    return item
