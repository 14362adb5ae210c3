"""ActionLedger, the ledger's public operations: one approved action, at most one effect,
whatever fails (docs/design.md §3).

Every side-effecting tool runs its effect through `ActionLedger`. A delivery *claims* the action
(store.py); when the claim finds a record, `decide()` (decisions.py) maps it to one row of the
decision table, and the operation carries the row out: dispatch, replay, reject, or take the
record over and reconcile with the downstream before anything is re-dispatched (external.py);
a same-account effect commits with its record in one transaction (transaction.py); the reconcile
tool settles an uncertain action (reconcile.py); a person settles an open one (here). Outcomes
are written only by the delivery that still owns the record. `attempts` counts every delivery
over the action's lifetime: workflow retries, redrives and manual replays all start from the
same record, so the budget is the one counter a redrive cannot reset (§6).

Why not only Powertools' idempotency utility
--------------------------------------------
`aws_lambda_powertools.utilities.idempotency` stores a hash of the event and replays the
response, which is the right tool for a pure function of its input. The ledger needs more:

- When the decorated function raises, the utility *deletes* its record so the next call runs
  again. For a payment whose call timed out that is exactly wrong: the refund may have happened,
  and running again is a second refund. The ledger keeps the record and marks it UNKNOWN.
- It has no UNKNOWN state and no reconciliation step: a record is INPROGRESS, COMPLETED or gone.
- It has no lifetime attempt budget that survives workflow retries and redrives.
- Its in-progress expiry is tied to the Lambda's remaining time, and an expired in-progress
  record simply lets the next call run the function again: a blind re-run, where the ledger
  takes over the lease conditionally and reconciles first.
- Its key is a hash of (part of) the payload; an action key here is the case's own identity, and
  the payload digest is checked separately so a changed request under the same key is rejected
  (KeyConflict) instead of being treated as a different action.

Where it does fit: read-only or naturally idempotent steps with no downstream effect, e.g.
guarding the reconcile tool's lookups or ValidateCase's case-record write against duplicate
deliveries. The ledger does not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from saga import clock as saga_clock
from saga.ceilings import DailyCharge
from saga.dynamodb import TransactWriteItem
from saga.errors import ActionPending, ActionSettled, BusinessRejection, SagaError
from saga.identity import ActionRequest
from saga.ledger.core import MAX_DECISION_ROUNDS, LedgerCore
from saga.ledger.decisions import Decision, settled_text
from saga.ledger.items import settled_placeholder, settlement_update
from saga.ledger.observer import LedgerObserver, PowertoolsObserver
from saga.ledger.records import (
    OPEN_STATUSES,
    SETTLE_SKEW_SECONDS,
    ActionOutcome,
    Attempt,
    CompanionWrite,
    EffectResult,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
    ReconcileDecision,
    Reconciliation,
    Resolution,
)
from saga.ledger.store import LedgerStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

    from saga.ledger.external import ExternalEffects
    from saga.ledger.reconcile import Reconciler
    from saga.ledger.transaction import Commit, NativeEffects


class ActionLedger:
    """Claim / decide / record for one ledger table (docs/design.md §3)."""

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient,
        policy: LedgerPolicy,
        clock: Callable[[], float] = saga_clock.now,
        observer: LedgerObserver | None = None,
    ) -> None:
        self.table_name = table_name
        self.client = client
        self.policy = policy
        self.clock = clock
        self.observer: LedgerObserver = observer or PowertoolsObserver()
        self.store = LedgerStore(table_name, client, policy, clock)
        self._core = LedgerCore(self.store, policy, clock, self.observer)

    # Each family of operations is imported on its first use: a function uses one (a tool its
    # own, the reconcile tool reconciliation), and the others' modules would be cold-start time
    # for nothing (`make bench`).
    @cached_property
    def _external(self) -> ExternalEffects:
        from saga.ledger.external import ExternalEffects

        return ExternalEffects(self._core)

    @cached_property
    def _native(self) -> NativeEffects:
        from saga.ledger.transaction import NativeEffects

        return NativeEffects(self._core)

    @cached_property
    def _reconciler(self) -> Reconciler:
        from saga.ledger.reconcile import Reconciler

        return Reconciler(self._core)

    def execute(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect: Callable[[], EffectResult],
        reconcile: Callable[[], Reconciliation],
        reattempt_window_seconds: float | None = None,
        companion: CompanionWrite | None = None,
        charge: DailyCharge | None = None,
    ) -> ActionOutcome:
        """Run `effect` at most once for the action, or replay / reject per docs/design.md §3.

        effect() raising: BusinessRejection -> recorded FAILED, re-raised; TransientError ->
        (nothing was sent) lease given up, re-raised; OutcomeUnknown -> recorded UNKNOWN,
        re-raised; anything else -> recorded UNKNOWN, raised as OutcomeUnknown. A record that an
        earlier delivery may have dispatched from (an expired lease, UNKNOWN, a released lease
        after an uncertain delivery) is taken over and reconcile() is asked first: Found ->
        COMPLETED without an effect; Absent -> effect() with the same key, but only while a
        request still in flight would be deduplicated (`reattempt_window_seconds` after the
        first possible dispatch; None: the lookup sees every request, so Absent is proof);
        otherwise, or Undeterminable -> UNKNOWN and OutcomeUnknown.

        No record is proof of no earlier delivery only while none can have expired: in an
        execution older than the retention, a fresh claim is looked up first as well. With the
        budget spent, the action is only looked up (never dispatched): found -> COMPLETED.

        `companion`: another table's write that says what the completion means there (the case
        record's COMPLETED, §3.11): written in one transaction with the COMPLETED record this
        delivery writes, after the record when the outcome was recorded before (a replay), and
        never before it; its failed condition is raised as its `refused` error once the record
        is written.

        `charge`: the daily refund ceiling (§3.12). The first claim (the put of a new record, or
        the takeover of a placeholder no delivery claimed) charges the day's counter in the same
        transaction and records the day; a refusal is recorded FAILED (RefundLimitReached) and
        raised, and replayed to every repeat; a BusinessRejection of the effect gives the amount
        back to the day charged, in its FAILED write. Takeovers, replays, retries and redrives
        never charge again.
        """
        return self._external.execute(
            request,
            attempt,
            effect=effect,
            reconcile=reconcile,
            reattempt_window_seconds=reattempt_window_seconds,
            companion=companion,
            charge=charge,
        )

    def execute_transaction(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect_items: list[TransactWriteItem],
        result: dict[str, Any],
        downstream_ref: str | None = None,
        explain_failure: Callable[[Mapping[int, dict[str, Any]]], SagaError],
        commit: Commit | None = None,
    ) -> ActionOutcome:
        """The ledger record (written COMPLETED) and the effect items in ONE TransactWriteItems
        (transaction.py): the effect happened iff the COMPLETED record exists.

        explain_failure({i: reason, ...}) turns the failed conditions of effect_items (every
        one that failed, by index: DynamoDB checks them all) into one error; a
        BusinessRejection is recorded FAILED (see record_failure) and raised. Cancellations for
        other reasons (a conflicting transaction, throttling) wrote nothing: TransientError.

        `commit(write)` is the downstream's way to its table (its port supplies it; None: the
        transaction is written as it is): it calls
        `write` (the transaction, decided as above) and returns what it returns, or raises
        without calling it: TransientError or OutcomeUnknown (nothing is written), or a
        BusinessRejection (the downstream refused: recorded FAILED like any rejection, unless an
        earlier delivery committed, whose outcome is returned).
        """
        return self._native.execute_transaction(
            request,
            attempt,
            effect_items=effect_items,
            result=result,
            downstream_ref=downstream_ref,
            explain_failure=explain_failure,
            commit=commit,
        )

    def record_failure(
        self, request: ActionRequest, attempt: Attempt, error: BusinessRejection
    ) -> ActionOutcome:
        """Record a rejection decided before the native transaction, then raise it.

        Writes FAILED if no record exists (a conditional PutItem) and raises `error`. If a record
        exists, it decides: the recorded failure, a conflict, pending, ... are raised; only a
        record that is already COMPLETED (an earlier delivery did commit) is returned, because
        the action did happen and a later rejection does not undo it.
        """
        return self._native.record_failure(request, attempt, error)

    def reconcile(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        reconcile: Callable[[], Reconciliation],
        reattempt_window_seconds: float | None = None,
    ) -> ReconcileDecision:
        """For the Reconcile tool: settle an uncertain action from the downstream and answer
        RESUME, RETRY or ESCALATE (reconcile.py). Never dispatches."""
        return self._reconciler.reconcile(
            request, attempt, reconcile=reconcile, reattempt_window_seconds=reattempt_window_seconds
        )

    def get(self, action_key: str) -> LedgerRecord | None:
        """Consistent read of one record, for tools and the CLI."""
        return self.store.get(action_key)

    def recorded_completion(self, request: ActionRequest) -> ActionOutcome | None:
        """The action's outcome if its record says COMPLETED for this request and no person
        settled it (one consistent read, nothing written, nothing dispatched), else None."""
        record = self.store.get(request.key)
        if (
            record is None
            or record.status is not LedgerStatus.COMPLETED
            or record.request_digest != request.digest
            or record.resolution is not None
        ):
            return None
        self.observer.on_decision(Decision.REPLAYED.value, request, record)
        return ActionOutcome.of(record, replayed=True, reconciled=False)

    # --- a person's decision ---------------------------------------------------------------
    def settle(self, action_key: str, resolution: Resolution) -> LedgerRecord | None:
        """Record a person's decision on an open action; the record as it is afterwards.

        The record keeps its status and history (an UNKNOWN stays UNKNOWN: the system still does
        not know), gains `resolution` {by, decision, at}, and loses `open_status`, so the
        sweeper's sparse index no longer finds it (no more escalation messages, the stuck-action
        alarm clears), and `expires_at`, so TTL never deletes the decision and no late delivery
        can claim the action afresh. From then on every delivery is refused with ActionSettled
        before any write, and reconciliation answers ESCALATE: nothing is dispatched again.

        The write is conditional on the record exactly as read (re-read and decided again when
        it changed). None: no record; a closed record (COMPLETED, FAILED) is returned as it is,
        nothing to settle. Raises ActionPending while a live attempt holds the action and
        ActionSettled when a person has settled it already.
        """
        for _ in range(MAX_DECISION_ROUNDS):
            seen = self.get(action_key)
            if seen is None or (seen.status not in OPEN_STATUSES and seen.resolution is None):
                return seen
            settled = self.store.apply(action_key, self.settle_write(seen, resolution))
            if settled is not None:
                return settled
            # changed since it was read: decide again from the record as it is now
        raise ActionPending(f"action {action_key} is contended; try again later")

    def settle_case_writes(
        self, keys: Mapping[str, str], resolution: Resolution, *, case_id: str
    ) -> list[tuple[str, TransactWriteItem]]:
        """The ledger's part of a case's resolution (docs/design.md §3.10): for each of the
        case's action keys (`{operation: key}`, saga.identity.case_action_keys), the settlement
        of its open record, or a SETTLED record where it has none, each conditional on the
        record as read (none: none still). Written in one transaction with the case record's
        resolution, they leave no moment, and no interleaving with a delivery that read the
        case record before the resolution, in which an action of the case can still be
        claimed. Closed and already settled records are left as they are. Raises ActionPending
        while a live attempt holds one of them."""
        writes: list[tuple[str, TransactWriteItem]] = []
        now = self.clock()
        for operation, key in keys.items():
            seen = self.get(key)
            if seen is None:
                compensates = keys.get("reserve") if operation == "release" else None
                placeholder = settled_placeholder(
                    self.table_name,
                    key,
                    case_id=case_id,
                    resolution=resolution,
                    now=now,
                    compensates=compensates,
                )
                writes.append((key, placeholder))
            elif seen.resolution is None and seen.status in OPEN_STATUSES:
                writes.append((key, self.settle_write(seen, resolution)))
        return writes

    def settle_write(self, seen: LedgerRecord, resolution: Resolution) -> TransactWriteItem:
        """The write of `settle` as one TransactWriteItems item, conditional on the record
        exactly as `seen`: for a caller that records the same decision elsewhere in the same
        transaction (the case record's resolution). Raises ActionSettled, ActionPending (a live
        attempt holds the action) or ValueError (a closed record has nothing to settle)."""
        key = seen.action_key
        if seen.resolution is not None:
            raise ActionSettled(f"{settled_text(key, seen)}; it cannot be settled twice")
        if seen.status not in OPEN_STATUSES:
            raise ValueError(f"action {key} is {seen.status.value}: nothing open to settle")
        # Judged on the settling clock (sagactl's: the person's laptop on AWS), so the lease of
        # a delivery that has not written its outcome counts as live until SETTLE_SKEW_SECONDS
        # after it ends: a fast clock must not settle an action about to be dispatched.
        held = seen.status is LedgerStatus.IN_PROGRESS
        if held and seen.lease_live(self.clock() - SETTLE_SKEW_SECONDS):
            raise ActionPending(
                f"action {key} is held by attempt {seen.owner} until "
                f"{saga_clock.iso(seen.lease_expires_at)}: it can be settled from "
                f"{saga_clock.iso(seen.lease_expires_at + SETTLE_SKEW_SECONDS)} (the lease and "
                f"{SETTLE_SKEW_SECONDS // 60} minutes for the clocks' skew), once that attempt "
                "has ended"
            )
        return settlement_update(self.table_name, seen, resolution, self.clock())
