"""Faults the sandbox alone cannot give, injected at the local AWS's boundaries (black-box).

Each is a dict in a case plan (`kind` + parameters), armed for one case at a time:

- `crash` {effect, nth, answer, jump}: the tool dies right after its downstream call committed
  the effect (a TransactWriteItems that puts a refund or a shipment, updates a reservation to
  released, or puts a reservation), before it records anything: the local AWS answers that
  request with a die directive (local_aws.invokes), the handler dies there in its worker
  process, and with answer `exited` or `timed_out` (stacks.lambda_errors.Death) the local
  Lambda runtime answers as Lambda answers a process that crashed or ran out of time
  (Runtime.ExitError / Sandbox.Timedout, or Lambda.Unknown in a local AWS started with
  `--crash-errors lambda-unknown`; plans written before answer `Lambda.Unknown`: a crash), or,
  with answer `Lambda.ServiceException`, the invoke itself fails after the function ran (the
  workflow retries the step: a second delivery). The clock jumps `jump` seconds, past the dead
  delivery's lease, as real time would have passed by the time anyone looks.
- `invoke_error` {tool, error, skip, count}: Lambda answers an invoke-level error: ServiceException
  after the function ran (its answer lost), TooManyRequestsException before it ran.
- `dynamodb` {table, operation, error, match, skip, count}: DynamoDB answers chosen requests
  (those naming `match`: the case id, or the hot SKU for the inventory) with throttling
  (ProvisionedThroughputExceededException), a transaction conflict (TransactionCanceledException
  / TransactionConflictException), or applies the request and answers InternalServerError.
  Injected in the server (the SDK's own retries see them); the campaign's observer is exempt.
- `jump` {at_request, seconds}: the clock jumps before the case's n-th AWS request from a tool
  (past leases, past the 10-minute token window; never past the 60-minute execution).

Clock jumps between a close and a redrive, and before a resubmission, are the runner's. The
crash and the jump act on the requests tools send to the local AWS (its request hooks, in the
server): every handler's requests are counted there, whichever process it runs in.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fault_campaign import overlap
from fault_campaign.overlap import OverlapMeter
from local_aws.clock import LOCAL_CLOCK
from local_aws.invokes import HandlerRequest, add_request_hook, current_invocation
from local_aws.lambda_context import die_directive
from local_aws.patching import wrap_once
from stacks.lambda_errors import LAMBDA_UNKNOWN, Death

OBSERVER_AGENT = "saga-campaign-observer"
_MARK = "_saga_campaign_nemesis"
_LOCK = threading.Lock()
TABLE_OUTPUTS: Mapping[str, str] = {
    "ledger": "LedgerTableName",
    "cases": "CasesTableName",
    "inventory": "InventoryTableName",
    "reservations": "ReservationsTableName",
    "payments": "PaymentsTableName",
    "shipments": "ShipmentsTableName",
    "sandbox": "SandboxTableName",
    "limits": "LimitsTableName",
}
_DYNAMODB_ERRORS = {
    "throttle": (
        400,
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput for the table was exceeded.",
    ),
    "internal_after": (500, "InternalServerError", "Internal server error"),
}
_CRASHED = "campaign_crash"  # the note on an invocation the crash nemesis ended: its answer
INVOKE_FAILED = "Lambda.ServiceException"  # a crash answer: the invoke fails after the function ran


@dataclass
class Armed:
    """The nemeses of one case and what they did (`fired`: a label per firing)."""

    nemeses: list[dict[str, Any]]
    tables: dict[str, str]  # logical name -> physical table name
    case_id: str
    counts: dict[int, int] = field(default_factory=dict)  # matches seen, per nemesis
    requests: int = 0  # AWS requests made by tools for this case
    fired: list[str] = field(default_factory=list)
    meter: OverlapMeter | None = None  # the case's deliveries that overlapped (overlap.py)

    def count(self, position: int) -> int:
        self.counts[position] = self.counts.get(position, 0) + 1
        return self.counts[position]

    def due(self, position: int, nemesis: Mapping[str, Any]) -> bool:
        """Count one matching event; whether this one falls in [skip, skip + count)."""
        seen = self.count(position)
        skip = int(nemesis.get("skip", 0))
        return skip < seen <= skip + int(nemesis.get("count", 1))


_ACTIVE: Armed | None = None


@contextmanager
def armed(
    nemeses: list[dict[str, Any]],
    outputs: Mapping[str, str],
    case_id: str,
    person: overlap.Person | None = None,
) -> Iterator[Armed]:
    """Arm the nemeses of one case while the block runs (hooks are installed on first use);
    `person`: who decides the case while an overlap holds it (overlap.py, `resolve`)."""
    global _ACTIVE  # noqa: PLW0603 (one case is armed at a time in this process)
    install()
    tables = {name: outputs[key] for name, key in TABLE_OUTPUTS.items() if key in outputs}
    state = Armed([dict(n) for n in nemeses], tables, case_id)
    state.meter = overlap.arm(state.nemeses, tables, case_id, state.fired, person)
    with _LOCK:
        _ACTIVE = state
    try:
        yield state
    finally:
        overlap.disarm()
        with _LOCK:
            _ACTIVE = None


def _active() -> Armed | None:
    return _ACTIVE


# --- the requests of handler code: crashes and clock jumps ---------------------------------------
def _committed_effect(
    operation: str, params: Mapping[str, Any], tables: Mapping[str, str]
) -> str | None:
    """Which effect a successful request committed, if it is one the crash nemesis knows."""
    if operation != "TransactWriteItems":
        return None
    for item in params.get("TransactItems", []):
        put = item.get("Put") or {}
        update = item.get("Update") or {}
        if put.get("TableName") == tables.get("payments"):
            return "refund"
        if put.get("TableName") == tables.get("shipments"):
            return "shipment"
        if update.get("TableName") == tables.get("reservations"):
            return "release"
        if put.get("TableName") == tables.get("reservations"):
            return "reserve"
    return None


def _before_handler_call(state: Armed) -> None:
    state.requests += 1
    for nemesis in state.nemeses:
        if nemesis["kind"] == "jump" and int(nemesis["at_request"]) == state.requests:
            LOCAL_CLOCK.advance(float(nemesis["seconds"]))
            state.fired.append(f"jump:{nemesis['seconds']}s")


def _after_handler_call(state: Armed, request: HandlerRequest) -> str | None:
    """The die directive for the request that committed the crash's effect, else None."""
    effect = _committed_effect(request.operation, request.document(), state.tables)
    if effect is None:
        return None
    for position, nemesis in enumerate(state.nemeses):
        if nemesis["kind"] != "crash" or nemesis["effect"] != effect:
            continue
        if state.count(position) != int(nemesis.get("nth", 1)):
            continue
        answer = str(nemesis["answer"])
        state.fired.append(f"crash:{effect}:{answer}")
        LOCAL_CLOCK.advance(float(nemesis.get("jump", 60)))
        if request.invocation is not None:
            request.invocation.notes[_CRASHED] = answer
        detail = f"campaign nemesis: died after the {effect} committed"
        return die_directive(_death(answer), detail)
    return None


def _death(answer: str) -> Death:
    """How the process ended for a crash answer (the invoke-level one: a crash the invoke
    wrapper turns into that error; a plan's old `Lambda.Unknown`: a crash)."""
    if answer in (INVOKE_FAILED, LAMBDA_UNKNOWN):
        return Death.EXITED
    return Death(answer)


class _HandlerRequests:
    """The crash and the jump, on the requests tools send to the local AWS."""

    def before(self, request: HandlerRequest) -> None:
        state = _active()
        if state is not None:
            with _LOCK:
                _before_handler_call(state)

    def after(self, request: HandlerRequest, status: int) -> str | None:
        state = _active()
        if state is None or status != 200:
            return None
        with _LOCK:
            return _after_handler_call(state, request)


# --- Lambda's answer: invoke-level errors ---------------------------------------------------------
def _invoke_error_payload(error: str, function_name: str) -> str:
    return json.dumps(
        {
            "errorType": error,
            "errorMessage": f"campaign nemesis: {error} invoking {function_name}",
        }
    )


def _install_invoke_hook() -> None:
    from moto.awslambda.models import LambdaFunction

    def wrap(original: Callable[[Any, Any], tuple[str, bool, str]]) -> Any:
        def invoke(self: Any, event: Any = None) -> tuple[str, bool, str]:
            state = _active()
            if state is None:
                return original(self, event)
            name = str(self.function_name)
            failing: dict[str, Any] | None = None
            for position, nemesis in enumerate(state.nemeses):
                is_due = nemesis["kind"] == "invoke_error" and nemesis["tool"] in name
                if is_due and state.due(position, nemesis):
                    failing = nemesis
            if failing is not None and failing["error"] != "Lambda.ServiceException":
                state.fired.append(f"invoke:{failing['error']}:{failing['tool']}")
                return _invoke_error_payload(failing["error"], name), True, ""
            payload, errored, logs = original(self, event)
            invocation = current_invocation()
            crashed = None if invocation is None else invocation.notes.get(_CRASHED)
            if crashed == INVOKE_FAILED or failing is not None:
                if failing is not None:
                    state.fired.append(f"invoke:{failing['error']}:{failing['tool']}")
                return _invoke_error_payload("Lambda.ServiceException", name), True, ""
            return payload, errored, logs

        return invoke

    wrap_once(LambdaFunction, "_invoke_lambda", _MARK, wrap)


# --- DynamoDB's answer --------------------------------------------------------------------------
def _tables_named(value: Any, found: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "TableName" and isinstance(item, str):
                found.add(item)
            else:
                _tables_named(item, found)
    elif isinstance(value, list):
        for item in value:
            _tables_named(item, found)
    return found


def _error_response(status: int, code: str, message: str, **extra: Any) -> Any:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-RequestId": str(uuid.uuid4()),
        "x-amzn-ErrorType": code,
    }
    return status, headers, json.dumps(body)


def _conflict(operation: str, request: Mapping[str, Any], table: str) -> Any:
    """A conflict on the items of `table` (as DynamoDB reports the item another transaction
    holds: TransactionConflict on that item, None on the others)."""
    if operation == "TransactWriteItems":
        items = request.get("TransactItems", [])
        conflicting = [table in _tables_named(item, set()) for item in items]
        if not any(conflicting):
            conflicting = [index == 0 for index in range(len(items))]
        reasons = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
            if conflict
            else {"Code": "None"}
            for conflict in conflicting
        ]
        codes = ", ".join(reason["Code"] for reason in reasons)
        return _error_response(
            400,
            "TransactionCanceledException",
            "Transaction cancelled, please refer cancellation reasons for specific reasons "
            f"[{codes}]",
            CancellationReasons=reasons,
        )
    return _error_response(
        400, "TransactionConflictException", "Transaction is ongoing for the item"
    )


def _dynamodb_fault(handler: Any) -> dict[str, Any] | None:
    state = _active()
    if state is None:
        return None
    if OBSERVER_AGENT in str(handler.headers.get("User-Agent", "")):
        return None
    operation = str(handler.headers.get("X-Amz-Target", "")).rpartition(".")[2]
    body = handler.body if isinstance(handler.body, str) else (handler.body or b"").decode()
    chosen: dict[str, Any] | None = None
    with _LOCK:
        for position, nemesis in enumerate(state.nemeses):
            if nemesis["kind"] != "dynamodb":
                continue
            if nemesis["operation"] not in ("*", operation):
                continue
            table = state.tables.get(str(nemesis["table"]))
            match = state.case_id if nemesis.get("match", "case") == "case" else nemesis["match"]
            if table is None or f'"{table}"' not in body or str(match) not in body:
                continue
            if table not in _tables_named(json.loads(body or "{}"), set()):
                continue
            if state.due(position, nemesis) and chosen is None:
                chosen = {**nemesis, "operation": operation, "body": body, "table_name": table}
                state.fired.append(f"dynamodb:{nemesis['error']}:{nemesis['table']}:{operation}")
    return chosen


def _install_dynamodb_hook() -> None:
    from moto.dynamodb.responses import DynamoHandler

    def wrap(original: Any) -> Any:
        def call_action(self: Any) -> Any:
            fault = _dynamodb_fault(self)
            if fault is None:
                return original(self)
            if fault["error"] == "conflict":
                return _conflict(
                    fault["operation"], json.loads(fault["body"] or "{}"), fault["table_name"]
                )
            status, code, message = _DYNAMODB_ERRORS[fault["error"]]
            if fault["error"] == "internal_after":
                original(self)  # applied; only the answer is an error
            return _error_response(status, code, message)

        return call_action

    wrap_once(DynamoHandler, "call_action", _MARK, wrap)


def install() -> None:
    """Install the three hooks into this process's local AWS (idempotent; inert until armed)."""
    with _LOCK:
        add_request_hook("campaign-nemeses", _HandlerRequests())
        overlap.install()
        _install_invoke_hook()
        _install_dynamodb_hook()
