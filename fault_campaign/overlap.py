"""The overlap nemesis: two deliveries of one action in flight at once (docs/design.md §3.2-§3.4).

A case plan's `{"kind": "overlap", "how", "step", "at"}` acts on the requests the step's tools
send to the local AWS (its request hooks, local_aws.invokes), whose Lambda runs each
invocation in a process of its own, concurrently. The step's first delivery A stops at the
ledger boundary `at`: its claim, its downstream dispatch, or its outcome write (ReserveStock has
one boundary: its transaction is all three). Its request waits in the local AWS, as a request
delayed on the network, or a process stalled just before it sends, would; then, by `how`:

- `hang`: A hangs past its task's timeout: the task times out at once (States.Timeout; the
  local clock moves by the task's TimeoutSeconds, as real time would have passed), and the next
  delivery of the same action B starts (ReconcileStep's for a forward step, the Retry's for the
  compensation). A's request goes on at the instant B's first request arrives: A completes
  while B runs. With `until: "b-done"` (A holds the action: it waits at its dispatch or its
  outcome write), A goes on only once B has written the action's record or ended: B meets A's
  claim while A still runs (on AWS, until its function timeout, after its task's).
- `abort`: the execution is stopped (StopExecution) while A waits, and redriven at once
  (RedriveExecution): the redriven delivery B of the same state and A go on together. With
  `resolve` (A waits at its dispatch or its outcome write: it holds the action), a person
  resolves the stopped case in between, through the operator's code path: the decision must be
  refused while A's lease is live (§3.10, `ActionInFlight`); what the tool answered is recorded
  with the operator's steps (`resolve:in-flight`, fault_campaign.operator_checks). At
  `reconcile` (a shape's, fault_campaign.shapes), A is ReconcileStep's delivery for the step,
  stopped at its first request: reconciliation holds no lease, so the stopped case is open and
  the person's decision is taken; the redriven delivery B then meets it (§3.10).
- `stale`: A's dispatch is applied but its answer is lost (so A writes UNKNOWN), and that
  outcome write is delayed past A's lease: it lands at the instant another delivery writes the
  action's record after the lease ran out (reconciliation settling it). The write must find the
  record no longer A's to write (§3.3: owner = this delivery, status IN_PROGRESS). With
  `until: "released"`, a write no other delivery releases waits for the person: the operator's
  steps run while it is held, and its `release` step lets it go on (fault_campaign.operator).

- `delayed` (a shape's, fault_campaign.shapes; at `dispatch`): A's dispatch is sent, then
  delayed on the network past A's lease while its task times out; it lands at the instant
  another delivery's dispatch of the same action applied (the takeover after A's lease ran out
  looked the action up, found nothing in flight visible, and re-attempted). What is dispatched
  must itself refuse to apply twice (so must the SDK's repeats of A's request after its read
  timeout, delayed as well): for the release, the transaction's condition that the
  reservation is HELD (§5.1), which is what lets the inventory prove absence with no window
  (§3.6). A lease is the function's timeout plus a 10 s margin: a request that late is well
  inside what AWS accepts (a signature is valid for 5 minutes).

A request waits at most `HOLD_SECONDS` of real time, so a case whose B never comes still ends.

On AWS, A can run until its function timeout (started + `functions.timeout_seconds`), whatever
its task's timeout; its lease must outlive that (§3.2, "a lease outlives the attempt that holds
it"). The nemesis watches for the contrary: another delivery's ledger write on A's record as
seen IN_PROGRESS under A's claim, while A still runs and before its function timeout: a lease
that ran out under a live owner. It is labelled `overlap:live-owner-overwritten:STEP` among the
case's fired labels and judged by fault_campaign.invariants (`lease_outlives_attempt`).
The meter (`OverlapMeter`) counts, per step, the deliveries of the case that were in flight at
the same time as another delivery of the same action: what the campaign report shows.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from local_aws.clock import LOCAL_CLOCK
from local_aws.invokes import (
    HandlerRequest,
    Invocation,
    add_request_hook,
    on_invocations,
)
from local_aws.task_timeouts import time_out_task, waiting_timeout
from saga.ledger.records import SETTLE_SKEW_SECONDS

HOLD_SECONDS = 15.0  # real time; below the function's timeout, far above what any release takes
# A delivery held for the person (`until: released`): the case closes and the person works
# meanwhile; still below the function's 30 s (the local runtime kills it there, in real time).
PERSON_HOLD_SECONDS = 25.0
# An abort's stop, decision and redrive always end (`finally`); on a loaded machine they may take
# longer than a hold, and the case must not go on (a redrive round's clock jump) meanwhile.
ABORT_SECONDS = 300.0
STEP_STATES: Mapping[str, str] = {
    "reserve": "ReserveStock",
    "refund": "IssueRefund",
    "ship": "CreateShipment",
    "release": "ReleaseReservation",
}
EFFECT_TABLES: Mapping[str, str] = {
    "reserve": "reservations",
    "refund": "payments",
    "ship": "shipments",
    "release": "reservations",
}
HOWS = ("hang", "abort", "stale")  # plan_overlap's forms
DELAYED = "delayed"  # a shape's form (module doc)
RESOLVE_IN_FLIGHT = "resolve:in-flight"  # the operator's step a `resolve` abort records
LIVE_OWNER_OVERWRITTEN = "overlap:live-owner-overwritten"  # what the nemesis saw (module doc)
# A person's decision while the case is stopped: given the event so far, records what the
# operator's tool answered (fault_campaign.runner).
Person = Callable[[dict[str, Any]], None]
BOUNDARIES = ("claim", "dispatch", "outcome")
AT_RECONCILIATION = "reconcile"  # an abort's: A is the step's reconciliation (module doc)
_RECONCILE_STATE = "ReconcileStep"
_STATE_STEPS = {state: step for step, state in STEP_STATES.items()}
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"})


def plan_overlap(seed: int, index: int) -> dict[str, Any] | None:
    """The overlap nemesis of case `index`, if any: its own random stream, so the rest of the
    plan is what it was without it."""
    rng = random.Random(f"{seed}:overlap:{index}")
    if rng.random() >= 0.3:
        return None
    how = rng.choices(HOWS, (5, 3, 4))[0]
    if how == "stale":
        step = rng.choice(("refund", "ship", "release"))
        return {"kind": "overlap", "how": how, "step": step, "at": "outcome"}
    step = rng.choices(tuple(STEP_STATES), (2, 4, 4, 2))[0]
    at = "dispatch" if step == "reserve" else rng.choice(BOUNDARIES)
    nemesis: dict[str, Any] = {"kind": "overlap", "how": how, "step": step, "at": at}
    holds = at != "claim" and step != "reserve"  # A holds the action (ReserveStock's one
    # request claims it): B meets A's claim
    if how == "abort" and holds:
        nemesis["resolve"] = True
    if how == "hang" and holds and rng.random() < 0.5:
        nemesis["until"] = "b-done"
    return nemesis


def held(lease: float, clock: float) -> bool:
    """Whether a resolution must leave alone an action whose delivery has written no outcome
    and claimed it until `lease`, at `clock` (§3.10: live until the clocks' skew after)."""
    return clock < lease + SETTLE_SKEW_SECONDS


def step_of(invocation: Invocation) -> str | None:
    """The step (action) a tool's invocation works on: its state's, or the one it reconciles."""
    event = invocation.event if isinstance(invocation.event, dict) else {}
    state = str((event.get("attempt") or {}).get("state", ""))
    if state == "ReconcileStep":
        return str(event.get("step") or "") or None
    return _STATE_STEPS.get(state)


def case_of(invocation: Invocation) -> str | None:
    event = invocation.event if isinstance(invocation.event, dict) else {}
    case = event.get("case")
    if not isinstance(case, dict) or "case_id" not in case:
        return None
    return str(case["case_id"])


def boundary(request: HandlerRequest, tables: Mapping[str, str], step: str) -> str | None:
    """Which ledger boundary of the step a request is: the claim (or a takeover), the
    downstream dispatch, the outcome write (or a given-back lease); None for anything else."""
    document = request.document()
    named = _tables_of(document)
    if request.operation == "TransactWriteItems":
        if tables.get(EFFECT_TABLES[step]) in named:
            return "dispatch"
        return "claim" if tables.get("ledger") in named else None
    if tables.get("ledger") not in named:
        return None
    values = document.get("ExpressionAttributeValues") or {}
    if request.operation == "PutItem":
        return "claim"
    if request.operation != "UpdateItem" or ":me" not in values:
        return None  # reconciliation's writes are on the record as seen
    expression = str(document.get("UpdateExpression", ""))
    if "#owner = :me" in expression:
        return "claim"  # a takeover
    return "outcome"  # an outcome, or a given-back lease


def _tables_of(document: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "TableName" and isinstance(value, str):
                found.add(value)
            else:
                found |= _tables_of(value)
    elif isinstance(document, list):
        for value in document:
            found |= _tables_of(value)
    return found


def _claimed(request: HandlerRequest, attribute: str, value: str, kind: str) -> str | None:
    """What a claim writes as `attribute` (a put item's, in a transaction too), or a takeover
    as the expression value `value`; `kind`: the DynamoDB type ("N", "S")."""
    document = request.document()
    items = [document.get("Item") or {}] + [
        (entry.get("Put") or {}).get("Item") or {} for entry in document.get("TransactItems", [])
    ]
    written = [(item.get(attribute) or {}).get(kind) for item in items]
    found = next((one for one in written if one is not None), None)
    if found is None:
        found = ((document.get("ExpressionAttributeValues") or {}).get(value) or {}).get(kind)
    return None if found is None else str(found)


def _lease_of(request: HandlerRequest) -> float | None:
    """The lease a claim (or a takeover) asks for."""
    lease = _claimed(request, "lease_expires_at", ":lease", "N")
    return None if lease is None else float(lease)


def _owner_of(request: HandlerRequest) -> str | None:
    """The owner a claim (or a takeover) writes: the delivery's attempt id."""
    return _claimed(request, "owner", ":me", "S")


@functools.cache
def function_timeout_seconds() -> float:
    """The tools' function timeout as the campaign's stack configures it (cdk.json)."""
    from sagactl.config import cdk_config

    return float(cdk_config().functions.timeout_seconds)


@dataclass
class Scenario:
    """One armed overlap nemesis and where it stands."""

    nemesis: dict[str, Any]
    case_id: str
    tables: Mapping[str, str]
    fired: list[str]  # the case's fired labels (fault_campaign.nemeses.Armed.fired)
    nemeses: list[dict[str, Any]]  # the case's nemeses: the lost answer joins them
    person: Person | None = None  # who resolves the stopped case (`resolve`)
    first: str | None = None  # A's request id
    lease: float | None = None  # until when A's claim holds the action
    owner: str | None = None  # A's claim's owner (its attempt id)
    deadline: float | None = None  # A's function timeout, on the local clock
    finished: threading.Event = field(default_factory=threading.Event)  # A's invocation ended
    gate: threading.Event = field(default_factory=threading.Event)  # A's request goes on
    # A has sent its dispatch (or reached its outcome without one), or ended: a delivery that
    # takes the action over now cannot race A's dispatch. Before that, a delivery that would
    # act after A's function timeout waits: on AWS, A has ended by then; here the clock may
    # pass it meanwhile (retry waits move it), and a delivery dispatching past its function
    # timeout is not a fault AWS can produce. (Not A's lease: whether the lease outlives the
    # function is what the nemesis checks.)
    dispatched: threading.Event = field(default_factory=threading.Event)
    aborting: threading.Event = field(default_factory=threading.Event)  # an abort fired
    redriven: threading.Event = field(default_factory=threading.Event)  # ... and redriven
    landed: threading.Event = field(default_factory=threading.Event)  # A's outcome write applied
    leases: dict[str, float] = field(default_factory=dict)  # each first delivery's claim
    owners: dict[str, str] = field(default_factory=dict)  # ... and its owner

    @property
    def step(self) -> str:
        return str(self.nemesis["step"])

    @property
    def how(self) -> str:
        return str(self.nemesis["how"])

    def ours(self, invocation: Invocation | None) -> bool:
        if invocation is None or case_of(invocation) != self.case_id:
            return False
        return step_of(invocation) == self.step

    def before(self, request: HandlerRequest) -> None:
        invocation = request.invocation
        if invocation is None or not self.ours(invocation):
            return
        at = boundary(request, self.tables, self.step)
        if self.first is None:
            self._maybe_fire(request, invocation, at)
        elif invocation.request_id == self.first:
            self._before_own(request, invocation, at)
        else:
            ledger = self.tables.get("ledger") in _tables_of(request.document())
            past = self.deadline is not None and LOCAL_CLOCK.now() >= self.deadline
            waits = self.how in ("stale", DELAYED)  # A goes on only after B's write
            if not waits and ledger and (past or not self._waits_for_b()):
                self.gate.set()  # B at the ledger: both go on at the same instant
            if past:
                self.dispatched.wait(HOLD_SECONDS)

    def hold_own(self, request: HandlerRequest) -> None:
        """Disarmed, but held for the person: A's requests wait too (the SDK's retry of the
        held write, sent after its read timeout, must not overtake the person)."""
        invocation = request.invocation
        if invocation is not None and invocation.request_id == self.first:
            self._hold()

    def landed_own(self, request: HandlerRequest, status: int) -> None:
        """A held delivery's outcome write applied (after its release)."""
        invocation = request.invocation
        own = invocation is not None and invocation.request_id == self.first
        if own and status == 200 and boundary(request, self.tables, self.step) == "outcome":
            self.landed.set()

    def _before_own(self, request: HandlerRequest, invocation: Invocation, at: str | None) -> None:
        if at == "claim" and self.lease is None:
            self.lease = _lease_of(request)
        if at == "claim" and self.owner is None:
            self.owner = _owner_of(request)
        if at == "outcome":
            self.dispatched.set()  # past its dispatch (or it sent none)
        if self.how == DELAYED and at == "dispatch" and not self.gate.is_set():
            self._hold()  # the SDK's repeat, after its read timeout, is delayed as well
        if self.how == "stale" and at == "outcome" and not self.gate.is_set():
            # the write is delayed past the lease; meanwhile the task times out
            threading.Thread(target=self._time_out, args=(invocation,), daemon=True).start()
            self._hold()

    def after(self, request: HandlerRequest, status: int) -> None:
        invocation = request.invocation
        if self.first is None or invocation is None or not self.ours(invocation):
            return
        at = boundary(request, self.tables, self.step)
        if invocation.request_id == self.first:
            if at == "dispatch":
                self.dispatched.set()
            return
        written = (
            status == 200
            and request.operation in _WRITES
            and self.tables.get("ledger") in _tables_of(request.document())
        )
        if written and self._over_live_owner(request):
            self.fired.append(f"{LIVE_OWNER_OVERWRITTEN}:{self.step}")
        if written and self._waits_for_b():
            self.gate.set()  # B wrote the action's record: A goes on
        if self.how == "stale" and written and self._lease_ran_out():
            self.gate.set()  # another delivery wrote the record after A's lease ran out
        if self.how == DELAYED and at == "dispatch" and status == 200:
            self.gate.set()  # another delivery's dispatch applied: A's lands after it

    def _over_live_owner(self, request: HandlerRequest) -> bool:
        """Whether this (successful) write was conditional on A's record as seen IN_PROGRESS
        under A's claim, while A still runs and its function timeout has not come: the clock
        only moves on and A's end is final, so judged now it held when the write applied."""
        values = request.document().get("ExpressionAttributeValues") or {}
        seen = (values.get(":old_status") or values.get(":seen_status") or {}).get("S")
        return (
            self.owner is not None
            and (values.get(":old_owner") or {}).get("S") == self.owner
            and seen == "IN_PROGRESS"
            and not self.finished.is_set()
            and self.deadline is not None
            and LOCAL_CLOCK.now() < self.deadline
        )

    def ended(self, invocation: Invocation) -> None:
        if invocation.request_id == self.first:
            self.finished.set()
            self.dispatched.set()
        elif self.first is not None and self._waits_for_b() and self.ours(invocation):
            self.gate.set()  # B ended (it met A's claim, or failed): A goes on

    def _waits_for_b(self) -> bool:
        return self.how == "hang" and self.nemesis.get("until") == "b-done"

    def _lease_ran_out(self) -> bool:
        return self.lease is not None and LOCAL_CLOCK.now() >= self.lease

    def _maybe_fire(self, request: HandlerRequest, invocation: Invocation, at: str | None) -> None:
        reconciling = self.nemesis["at"] == AT_RECONCILIATION
        if _state_of(invocation) != (_RECONCILE_STATE if reconciling else STEP_STATES[self.step]):
            return  # A is the step's own delivery (at `reconcile`: its reconciliation's)
        lease = _lease_of(request) if at == "claim" else None
        if lease is not None:
            self.leases[invocation.request_id] = lease
        owner = _owner_of(request) if at == "claim" else None
        if owner is not None:
            self.owners[invocation.request_id] = owner
        if self.how == "stale":
            if at == "claim":
                self._first(invocation)
                self.nemeses.append(self._lost_answer())
                self.fired.append(f"overlap:stale:{self.step}")
            return
        if reconciling:
            pass  # A's first request, whatever it is
        elif at != self.nemesis["at"] and not (self.step == "reserve" and at == "dispatch"):
            return
        self._first(invocation)
        if self.how == "abort":
            self.aborting.set()  # before the stop: the runner waits for the redrive
        if self.how == DELAYED:
            self.dispatched.set()  # sent: only the network holds it
        self.fired.append(f"overlap:{self.how}:{self.step}:{self.nemesis['at']}")
        target = self._abort_and_redrive if self.how == "abort" else self._time_out
        threading.Thread(target=target, args=(invocation,), daemon=True).start()
        self._hold()

    def _first(self, invocation: Invocation) -> None:
        """A is this delivery: its claim (the lease and owner it asked for, when it claimed
        before this request), and when its function times out."""
        self.first = invocation.request_id
        self.lease = self.leases.get(invocation.request_id)
        self.owner = self.owners.get(invocation.request_id)
        self.deadline = invocation.started + function_timeout_seconds()

    def _hold(self) -> None:
        """A's request waits for its release (or, said in the report, for HOLD_SECONDS; a
        delivery held for the person, `until: released`, longer)."""
        person = self.nemesis.get("until") == "released"
        if not self.gate.wait(PERSON_HOLD_SECONDS if person else HOLD_SECONDS):
            self.fired.append(f"overlap:unreleased:{self.step}")

    def _lost_answer(self) -> dict[str, Any]:
        """A's dispatch is applied and answered with an error (fault_campaign.nemeses)."""
        return {
            "kind": "dynamodb",
            "table": EFFECT_TABLES[self.step],
            "operation": "TransactWriteItems",
            "error": "internal_after",
            "match": "case",
            "skip": 0,
            "count": 1,
        }

    def _time_out(self, invocation: Invocation) -> None:
        """A's task times out now, the clock moved by its timeout."""
        execution, state = _task_of(invocation)
        for _ in range(500):
            seconds = waiting_timeout(execution, state)
            if seconds is not None:
                LOCAL_CLOCK.advance(seconds)
                time_out_task(execution, state)
                return
            time.sleep(0.01)

    def _abort_and_redrive(self, invocation: Invocation) -> None:
        try:
            execution, _ = _task_of(invocation)
            client = _step_functions()
            client.stop_execution(executionArn=execution, cause="campaign nemesis: overlap")
            status = "RUNNING"
            for _ in range(500):
                status = client.describe_execution(executionArn=execution)["status"]
                if status != "RUNNING":
                    break
                time.sleep(0.01)
            if self.nemesis.get("resolve") and self.person is not None:
                self.person(self._decision(status))
            client.redrive_execution(executionArn=execution)
        finally:
            self.redriven.set()

    def _decision(self, status: str) -> dict[str, Any]:
        """The person's step while A holds the action: what they find; `skipped` says why they
        did not decide (the execution never stopped, or A's lease ran out meanwhile: a clock
        jump, and then settling is allowed and A's outcome is §3.10's backstop)."""
        clock = LOCAL_CLOCK.now()
        event: dict[str, Any] = {
            "step": RESOLVE_IN_FLIGHT,
            "action": self.step,
            "at": self.nemesis["at"],
            "execution_status": status,
            "lease": self.lease,
            "clock": clock,
        }
        if status == "RUNNING":
            event["skipped"] = "the execution did not stop"
        elif self.nemesis["at"] == AT_RECONCILIATION:
            pass  # A holds nothing: the stopped case is open, the person decides it
        elif self.lease is None or not held(self.lease, clock):
            event["skipped"] = "no live lease of A's"
        return event


def _step_functions() -> Any:
    """A Step Functions client of this process's local AWS."""
    import boto3

    from local_aws.lambda_runtime import FAKE_CREDENTIALS, current_runtime

    settings = current_runtime()
    return boto3.client(
        "stepfunctions",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def _state_of(invocation: Invocation) -> str:
    event = invocation.event if isinstance(invocation.event, dict) else {}
    return str((event.get("attempt") or {}).get("state", ""))


def _task_of(invocation: Invocation) -> tuple[str, str]:
    attempt = (invocation.event or {}).get("attempt") or {}
    return str(attempt.get("execution", "")), str(attempt.get("state", ""))


# --- the hooks --------------------------------------------------------------------------------
class _Active:
    scenarios: list[Scenario] = []
    held: list[Scenario] = []  # disarmed while a delivery waits: released by `release_held`
    meter: OverlapMeter | None = None


class _Requests:
    def before(self, request: HandlerRequest) -> None:
        for scenario in list(_Active.scenarios):
            scenario.before(request)
        for scenario in list(_Active.held):
            scenario.hold_own(request)

    def after(self, request: HandlerRequest, status: int) -> str | None:
        for scenario in list(_Active.scenarios):
            scenario.after(request, status)
        for scenario in list(_Active.held):
            scenario.landed_own(request, status)
        return None


@dataclass
class _Delivery:
    step: str
    started: float
    ended: float | None = None


class OverlapMeter:
    """The invocations of one case's tools, and which overlapped another of the same action."""

    def __init__(self, case_id: str) -> None:
        self.case_id = case_id
        self._lock = threading.Lock()
        self._deliveries: dict[str, _Delivery] = {}

    def __call__(self, phase: str, invocation: Invocation) -> None:
        step = step_of(invocation)
        if step is None or case_of(invocation) != self.case_id or not invocation.ran:
            return
        with self._lock:
            if phase == "start":
                self._deliveries[invocation.request_id] = _Delivery(step, invocation.started_real)
            elif invocation.request_id in self._deliveries:
                self._deliveries[invocation.request_id].ended = invocation.ended_real

    def overlaps(self) -> dict[str, int]:
        """Per step, the deliveries that were in flight while another of the same action was."""
        now = time.monotonic()
        with self._lock:
            deliveries = list(self._deliveries.values())
        counts: dict[str, int] = {}
        for one in deliveries:
            for other in deliveries:
                if other is one or other.step != one.step:
                    continue
                if one.started < (other.ended or now) and other.started < (one.ended or now):
                    counts[one.step] = counts.get(one.step, 0) + 1
                    break
        return dict(sorted(counts.items()))


def install() -> None:
    add_request_hook("campaign-overlap", _Requests())


def arm(
    nemeses: list[dict[str, Any]],
    tables: Mapping[str, str],
    case_id: str,
    fired: list[str],
    person: Person | None = None,
) -> OverlapMeter:
    """Arm the case's overlap nemeses and its meter (until `disarm`)."""
    install()
    _Active.scenarios = [
        Scenario(n, case_id, tables, fired, nemeses, person)
        for n in nemeses
        if n["kind"] == "overlap"
    ]
    meter = OverlapMeter(case_id)
    _Active.meter = meter
    on_invocations("campaign-overlap-meter", meter)
    on_invocations("campaign-overlap", _ended)
    return meter


def _ended(phase: str, invocation: Invocation) -> None:
    if phase == "end":
        for scenario in [*_Active.scenarios, *_Active.held]:
            scenario.ended(invocation)


def disarm(*, keep_held: bool = False) -> None:
    """No overlap fires any more; a delivery held now goes on (with `keep_held`, only at
    `release_held`, or after its HOLD_SECONDS)."""
    for scenario in _Active.scenarios:
        if keep_held and scenario.first is not None and not scenario.finished.is_set():
            _Active.held.append(scenario)
        else:
            scenario.gate.set()
    _Active.scenarios = []
    if not keep_held:
        release_held()
        _Active.held = []


def release_held() -> bool:
    """The deliveries `disarm(keep_held=True)` left waiting go on; wait for each to have
    written its outcome (or ended). Whether there was one."""
    held = list(_Active.held)
    for scenario in held:
        scenario.gate.set()
    deadline = time.monotonic() + HOLD_SECONDS
    for scenario in held:
        while not (scenario.landed.is_set() or scenario.finished.is_set()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    return bool(held)


def settle() -> bool:
    """Wait for an abort's redrive under way; whether there was one (its execution runs again:
    wait for it to close again)."""
    waited = False
    for scenario in list(_Active.scenarios):
        if scenario.aborting.is_set():
            scenario.redriven.wait(ABORT_SECONDS)
            scenario.aborting.clear()
            waited = True
    return waited


def only_overlaps(nemeses: list[dict[str, Any]], fired: list[str]) -> bool:
    """Whether every nemesis that fired in a case is its overlap's (a stale write's lost answer
    included): such a case ends as it would without it (docs/invariants.md)."""
    stale = any(n["kind"] == "overlap" and n["how"] == "stale" for n in nemeses)
    planned_dynamodb = any(n["kind"] == "dynamodb" for n in nemeses)
    lost_answer = stale and not planned_dynamodb
    return all(
        label.startswith("overlap:")
        or (lost_answer and label.startswith("dynamodb:internal_after:"))
        for label in fired
    )


# --- the report ---------------------------------------------------------------------------------
def summarize(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per step: the deliveries in flight while another delivery of the same action was, and
    the cases where that happened; and which overlap nemeses fired."""
    deliveries: dict[str, int] = {}
    cases_with: dict[str, int] = {}
    for case in cases:
        for step, count in (case.get("overlaps") or {}).items():
            deliveries[step] = deliveries.get(step, 0) + int(count)
            cases_with[step] = cases_with.get(step, 0) + 1
    fired = [f for case in cases for f in case.get("fired", []) if f.startswith("overlap:")]
    return {
        "deliveries": dict(sorted(deliveries.items())),
        "cases": dict(sorted(cases_with.items())),
        "total": sum(deliveries.values()),
        "fired": len(fired),
    }


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    rows = [
        f"| {step} | {count} | {summary['cases'].get(step, 0)} |"
        for step, count in summary["deliveries"].items()
    ]
    return [
        "",
        "## Deliveries in flight at once",
        "",
        "Deliveries of one action that overlapped in time (each Lambda invocation runs in a "
        "process of its own, concurrently): a delivery counts when another delivery of the same "
        "action was in flight at some moment of its own; the step's tool and ReconcileStep's "
        f"reconciliation of it are deliveries of one action. {summary['total']} deliveries, "
        f"{summary['fired']} overlap nemeses fired (fault_campaign/overlap.py).",
        "",
        "| step | deliveries that overlapped another | cases |",
        "|---|---|---|",
        *rows,
    ]
