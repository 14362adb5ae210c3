"""Which fault makes a state honest: the campaign's table of allowed alternatives.

The promise fixes what a fault-free case ends as (COMPLETED, with exactly one reservation, one
refund and one shipment). Every other state a case may honestly end in is an *alternative*, and
each alternative is allowed only where the case's plan holds a fault that can cause it (or, for
a few, where a record shows the condition the design names, e.g. "the shipment may have
happened"). Nothing is allowed because it was seen. `ALLOWANCES` is that table;
docs/invariants.md prints it (tests/campaign/test_campaign_units.py keeps the two equal), and
the checks (outcomes.py, escalated.py, invariants.py) ask `enabling()` for the names of the
faults present, a violation when there is none.
"""

from __future__ import annotations

from dataclasses import dataclass

from fault_campaign.plan_evidence import (
    PAYMENT_KEY_RETENTION_SECONDS,
    STEP_PARTS,
    UNCERTAIN_FAULTS,
    Evidence,
    Fault,
    budget_spent,
    ceiling_reached,
    crash,
    dynamodb,
    foreign,
    invoke,
    jumps,
    overlap,
    redrive_jump,
    retention_passed,
    sandbox,
    ship_may_have_shipped,
    stock_short,
)


@dataclass(frozen=True)
class Allowance:
    key: str
    allows: str
    faults: tuple[Fault, ...]


# --- the faults, named ---------------------------------------------------------------------------
STEP_UNCERTAIN = Fault(
    "sandbox:<step>:uncertain",
    "the step's downstream loses an answer, times out, keeps a request in flight or stops "
    "answering (lose_response, timeout, in_flight, unavailable)",
    sandbox(UNCERTAIN_FAULTS),
)
STEP_FAILS_BEFORE_COMMIT = Fault(
    "sandbox:<step>:fail_before_commit",
    "the step's downstream fails before committing: a delivery gives its lease back, and enough "
    "of them spend the retries (and, with redrives, the attempt budget)",
    sandbox(("fail_before_commit",)),
)
STEP_CRASH = Fault(
    "crash:<step>",
    "the tool dies right after the step's effect committed, before recording it",
    crash(),
)
CLOCK_JUMP = Fault(
    "jump:in-execution",
    "the clock jumps during the execution: a delivery's lease runs out under it",
    jumps,
)
LEDGER_FAULTS = Fault(
    "dynamodb:ledger",
    "DynamoDB throttles, conflicts or loses the answer of ledger requests (the daily refund "
    "counters' transactions are the ledger's too)",
    dynamodb("ledger", "limits"),
)
STEP_TABLE_FAULTS = Fault(
    "dynamodb:<step tables>",
    "DynamoDB throttles, conflicts or loses the answer of the step's own tables, its sandbox "
    "control or its case record",
    dynamodb("sandbox", "cases", own=True),
)
STEP_INVOKE = Fault(
    "invoke:<step tool>",
    "Lambda fails invokes of the step's tool (throttled before it runs, or its answer lost)",
    invoke(),
)
STEP_STALE_ANSWER = Fault(
    "overlap:<step>:stale",
    "the overlap nemesis loses the answer of the step's applied dispatch and holds that "
    "delivery's outcome write past its lease (its `stale` form)",
    overlap("stale"),
)
STEP_DELAYED_DISPATCH = Fault(
    "overlap:<step>:delayed",
    "the overlap nemesis delays the step's dispatch on the network past its delivery's lease "
    "(its `delayed` form): it may land after that delivery recorded UNKNOWN, before any "
    "other delivery looked it up",
    overlap("delayed"),
)
STEP_HUNG_DELIVERY = Fault(
    "overlap:<step>:hang",
    "a delivery of the step hangs past its task's timeout (the overlap nemesis's `hang` form): "
    "it still holds the record, or records the effect, after reconciliation gave up",
    overlap("hang"),
)

ALLOWANCES: tuple[Allowance, ...] = (
    Allowance(
        "OUT_OF_STOCK",
        "ESCALATED OUT_OF_STOCK: nothing reserved, refunded or shipped",
        (
            Fault(
                "stock-short",
                "the SKU's stock before the case is below the quantity (or the SKU is unstocked)",
                stock_short,
            ),
            Fault(
                "sandbox:reserve:reject",
                "the sandbox inventory refuses the reservation",
                sandbox(("reject",), "reserve"),
            ),
        ),
    ),
    Allowance(
        "REFUND_REJECTED",
        "ESCALATED REFUND_REJECTED: no refund, the reservation released (or the release blocked)",
        (
            Fault(
                "sandbox:refund:reject",
                "the provider refuses the refund",
                sandbox(("reject",), "refund"),
            ),
        ),
    ),
    Allowance(
        "REFUND_LIMIT_REACHED",
        "ESCALATED REFUND_LIMIT_REACHED: no refund, nothing charged, the reservation released "
        "(or the release blocked)",
        (
            Fault(
                "ceiling-reached",
                "the tenant's refunds of the day, as the campaign's own log of claims adds them "
                "up, leave less than the amount under its daily ceiling; the escalation's "
                "numbers are those (docs/design.md §3.12)",
                ceiling_reached,
            ),
        ),
    ),
    Allowance(
        "SHIPMENT_REJECTED",
        "ESCALATED SHIPMENT_REJECTED: no shipment, the refund kept, the reservation released",
        (
            Fault(
                "sandbox:shipment:reject",
                "the carrier refuses the shipment",
                sandbox(("reject",), "ship"),
            ),
        ),
    ),
    Allowance(
        "REJECTED_AFTER_EFFECTS",
        "ESCALATED REJECTED_AFTER_EFFECTS at a step: its key holds another request; nothing done "
        "under it, earlier effects kept or compensated",
        (
            Fault(
                "foreign-record:<step>",
                "the step's action key was used before with other parameters (a ledger record "
                "with another digest)",
                foreign(),
            ),
        ),
    ),
    Allowance(
        "OUTCOME_UNCERTAIN",
        "ESCALATED OUTCOME_UNCERTAIN at a step: its record open (not COMPLETED) and marked "
        "escalated; no later step ran, nothing compensated",
        (
            STEP_UNCERTAIN,
            STEP_FAILS_BEFORE_COMMIT,
            STEP_CRASH,
            CLOCK_JUMP,
            LEDGER_FAULTS,
            STEP_TABLE_FAULTS,
            STEP_INVOKE,
            Fault(
                "redrive-jump:>key-retention",
                "a redrive (or the operator) comes after the provider's key retention: a "
                'refund "not found" no longer allows a re-attempt',
                redrive_jump(PAYMENT_KEY_RETENTION_SECONDS),
            ),
        ),
    ),
    Allowance(
        "RECONCILIATION_FAILED",
        "ESCALATED RECONCILIATION_FAILED at a step: the reconcile tool itself failed past its "
        "retries; no later step ran",
        (
            Fault(
                "invoke:ReconcileAction",
                "Lambda fails invokes of the reconcile tool",
                invoke("ReconcileAction"),
            ),
            Fault(
                "crash:<step>+in_flight",
                "the step's request in flight commits during the reconcile tool's lookup, and "
                "the tool dies right there (the crash fires where the effect commits): "
                "ReconcileStep's catch-all escalates a reconcile tool that died",
                lambda e: crash()(e) and sandbox(("in_flight",))(e),
            ),
            LEDGER_FAULTS,
            STEP_TABLE_FAULTS,
        ),
    ),
    Allowance(
        "step-completed-unreported",
        "a step's record COMPLETED that the escalation does not list as a confirmed effect "
        "(only with RECONCILIATION_FAILED)",
        (
            Fault(
                "invoke:ReconcileAction:Lambda.ServiceException",
                "the reconcile tool recorded the effect it found, then its answer was lost on "
                "every retry",
                invoke("ReconcileAction", "Lambda.ServiceException"),
            ),
            STEP_HUNG_DELIVERY,
        ),
    ),
    Allowance(
        "effect-unconfirmed",
        "an effect exists while its record is open (UNKNOWN, or IN_PROGRESS marked as a possible "
        "dispatch)",
        (
            STEP_UNCERTAIN,
            STEP_STALE_ANSWER,
            STEP_DELAYED_DISPATCH,
            STEP_HUNG_DELIVERY,
            STEP_CRASH,
            CLOCK_JUMP,
            LEDGER_FAULTS,
            STEP_TABLE_FAULTS,
            STEP_INVOKE,
        ),
    ),
    Allowance(
        "outcome-after-settlement",
        "a delivery still running when a person settled its action writes its outcome after the "
        "decision: the record keeps the resolution and takes the delivery's status, with no "
        "open_status and no retention (docs/design.md §3.10)",
        (STEP_STALE_ANSWER,),
    ),
    Allowance(
        "compensation-blocked",
        "the release refused (`compensation_blocked`): the reservation stays HELD",
        (
            Fault(
                "ship-may-have-shipped",
                "the ship record is COMPLETED, IN_PROGRESS or UNKNOWN: the stock may have left "
                "(docs/design.md §5, item 1)",
                ship_may_have_shipped,
            ),
            Fault(
                "sandbox:release:reject",
                "the sandbox inventory refuses the release",
                sandbox(("reject",), "release"),
            ),
            Fault(
                "foreign-record:release",
                "the release's key was used before with other parameters",
                foreign("release"),
            ),
        ),
    ),
    Allowance(
        "compensation-pending",
        "FAILED with the compensation pending: the release (or the outcome's record after it) "
        "failed past its retries; the case record says COMPENSATION_PENDING",
        (
            Fault(
                "sandbox:release:faults",
                "the release's downstream fails, loses answers or times out",
                sandbox(("fail_before_commit", *UNCERTAIN_FAULTS), "release"),
            ),
            STEP_CRASH,
            STEP_INVOKE,
            Fault(
                "invoke:RecordOutcome",
                "Lambda fails invokes of RecordOutcome after the release",
                invoke("RecordOutcome"),
            ),
            LEDGER_FAULTS,
            STEP_TABLE_FAULTS,
            CLOCK_JUMP,
        ),
    ),
    Allowance(
        "compensation-pending-unmarked",
        "the case record still IN_PROGRESS while the compensation is pending: only where no "
        "release record exists (the release never reached the ledger)",
        (
            Fault(
                "invoke:ReleaseReservation",
                "Lambda throttles the release before it runs",
                invoke("ReleaseReservation"),
            ),
            Fault("dynamodb:cases", "DynamoDB fails the case record's mark", dynamodb("cases")),
        ),
    ),
    Allowance(
        "failed-resumable",
        "FAILED at a step after its transient retries, the case record IN_PROGRESS; nothing after "
        "the step ran",
        (
            STEP_FAILS_BEFORE_COMMIT,
            STEP_INVOKE,
            LEDGER_FAULTS,
            STEP_TABLE_FAULTS,
            STEP_CRASH,
            CLOCK_JUMP,
        ),
    ),
    Allowance(
        "failed-resumable-outcome",
        "FAILED at the validation or the outcome's record after their transient retries",
        (
            Fault(
                "invoke:ValidateCase/RecordOutcome",
                "Lambda fails invokes of the validation or of the outcome's record",
                lambda e: invoke("ValidateCase")(e) or invoke("RecordOutcome")(e),
            ),
            Fault("dynamodb:cases", "DynamoDB fails the case record's writes", dynamodb("cases")),
        ),
    ),
    Allowance(
        "still-failed-after-final-redrive",
        "still FAILED after the cause was removed and a last redrive: the step's budget is spent "
        "(a person decides)",
        (
            Fault(
                "budget-spent",
                "the failed step's record used the attempt budget",
                budget_spent,
            ),
        ),
    ),
    Allowance(
        "closed-record-expired",
        "an effect without its ledger record: the record was closed (COMPLETED) and its "
        "retention passed since (an open record never expires, docs/design.md §3.7)",
        (
            Fault(
                "jump:>retention",
                "the clock passed the ledger's retention after the case closed (a resubmission "
                "or the operator, 30 days and more)",
                retention_passed,
            ),
        ),
    ),
)
_BY_KEY = {allowance.key: allowance for allowance in ALLOWANCES}


def enabling(key: str, evidence: Evidence) -> list[str]:
    """The names of the faults in `evidence` that make alternative `key` honest (empty: none,
    the state is a violation)."""
    step = evidence.step or ""
    return [
        fault.name.replace("<step>", step).replace(
            "<step tool>", STEP_PARTS.get(step, ("",) * 3)[2]
        )
        for fault in _BY_KEY[key].faults
        if fault.present(evidence)
    ]


def render() -> str:
    """The table as docs/invariants.md prints it."""
    lines = ["| alternative | allowed state | enabling faults (any one) |", "|---|---|---|"]
    for allowance in ALLOWANCES:
        faults = "<br>".join(f"`{fault.name}`: {fault.why}" for fault in allowance.faults)
        lines.append(f"| `{allowance.key}` | {allowance.allows} | {faults} |")
    return "\n".join(lines) + "\n"


BEGIN = (
    "<!-- allowances: begin (generated from fault_campaign/honesty.py; a test keeps it equal) -->"
)
END = "<!-- allowances: end -->"


def printed(page: str) -> str:
    """The table as `page` (docs/invariants.md) prints it, between its markers."""
    start = page.index(BEGIN) + len(BEGIN) + 1
    return page[start : page.index(END)]


def reprinted(page: str) -> str:
    """`page` with the table between its markers printed again from ALLOWANCES."""
    start = page.index(BEGIN) + len(BEGIN) + 1
    return page[:start] + render() + page[page.index(END) :]
