"""Typed models of the case (docs/design.md §8, the external contract) and of the tool payloads.

Every model is strict: unknown fields are refused, numbers are never coerced from strings or
floats (amounts are integers in minor units), and a validation failure becomes one
`InvalidRequest` whose message names each offending field by its path (`refund.amount_minor`).

The approval digest covers the immutable, consequential parameters of the case and the approved
revision. `sandbox.faults` is test-only steering for the sandbox downstreams and is never
digested.
"""

# Annotations are evaluated as the classes are created (no `from __future__ import annotations`):
# pydantic evaluates every field annotation of a model anyway, and a postponed one is first
# compiled back from its string (about 3 ms of a tool's cold start: case, payload, environment).

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from saga import formats
from saga.approvals import CaseApprovals, SignedApproval
from saga.errors import ApprovalMismatch, InvalidRequest
from saga.fault_plan import validate_fault_plan
from saga.identity import AGENT_CASE_PREFIX, agent_namespace, sha256_hex

if TYPE_CHECKING:
    from saga.ledger import ActionOutcome

# A Step Functions execution name is 1-80 characters without whitespace, brackets, wildcards or
# most punctuation. The case id is the execution name (docs/design.md §2), and it is also a
# component
# of action keys (no `#`) and of carrier references, so it is kept to a portable subset.
CASE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$"
TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
REFERENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
SKU_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+$"

MAX_QUANTITY = 1_000
MAX_AMOUNT_MINOR = 100_000_000
# Revisions travel through JSONata, whose numbers are doubles: above 2**53 one would round
# and the approval digest would stop matching the signed one.
MAX_REVISION = 2**53 - 1
MAX_FAULTS_PER_DOWNSTREAM = 50

CaseId = Annotated[str, StringConstraints(pattern=CASE_ID_PATTERN)]
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
Reference = Annotated[str, StringConstraints(pattern=REFERENCE_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]

Step = Literal["reserve", "refund", "ship"]
Outcome = Literal["COMPLETED", "ESCALATED"]


def _accepted(
    problem: Callable[..., str | None], limit_of: str | None = None
) -> Callable[[str], str]:
    """A validator from a downstream format rule: the value unchanged, or a ValueError."""
    args = () if limit_of is None else (formats.ADDRESS_TEXT_LIMITS[limit_of],)

    def check(value: str) -> str:
        found = problem(value, *args)
        if found is not None:
            raise ValueError(found)
        return value

    return check


class StrictModel(BaseModel):
    """Base of every model: strict types, unknown fields refused, immutable.

    Built on first use (`defer_build`): a handler validates its own payload and builds its own
    result, and never pays for the models of the other handlers (nor for the case's parts on
    their own: a payload's validator holds them). `make bench` measures that first use.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


# --- the case (docs/design.md §8) -----------------------------------------------------------------
class Order(StrictModel):
    order_id: Reference
    customer_id: Reference


class Reserve(StrictModel):
    sku: Annotated[str, StringConstraints(pattern=SKU_PATTERN)]
    quantity: Annotated[int, Field(ge=1, le=MAX_QUANTITY)]


class Refund(StrictModel):
    payment_reference: Reference
    amount_minor: Annotated[int, Field(ge=1, le=MAX_AMOUNT_MINOR)]
    currency: Annotated[str, AfterValidator(_accepted(formats.currency_problem))]


class Address(StrictModel):
    """What every carrier accepts (saga.formats): checked here, never rewritten."""

    name: Annotated[str, AfterValidator(_accepted(formats.text_problem, "name"))]
    line1: Annotated[str, AfterValidator(_accepted(formats.text_problem, "line1"))]
    city: Annotated[str, AfterValidator(_accepted(formats.text_problem, "city"))]
    postal_code: Annotated[str, AfterValidator(_accepted(formats.postal_code_problem))]
    country: Annotated[str, AfterValidator(_accepted(formats.country_problem))]


class Shipment(StrictModel):
    address: Address


ApprovalText = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Approver = Annotated[str, StringConstraints(pattern=EMAIL_PATTERN, max_length=254)]
KeyId = Annotated[str, StringConstraints(min_length=1, max_length=2048)]
SignatureText = Annotated[str, StringConstraints(min_length=1, max_length=256)]
# Four eyes needs one co-signature; a few more are tolerated (each verified), not a list.
MAX_CO_SIGNATURES = 4


class CoSignature(StrictModel):
    """Another approver's signature over the same digest (four eyes, docs/design.md §9): the
    fields of the approval that differ per signer, all required."""

    approved_by: Approver
    signed_at: ApprovalText
    key_id: KeyId
    signature: SignatureText
    start_by: ApprovalText | None = None


class Approval(StrictModel):
    """Who approved which revision, and (saga.approvals) the signature that proves it. The
    signature fields are optional here so that an unsigned case is refused as ApprovalInvalid,
    with what to do, rather than as a malformed request."""

    revision: Annotated[int, Field(ge=1, le=MAX_REVISION)]
    approved_by: Approver
    digest: Digest
    signed_at: ApprovalText | None = None
    key_id: KeyId | None = None
    signature: SignatureText | None = None
    # Optional deadline for starting the case, checked at ValidateCase only.
    start_by: ApprovalText | None = None
    # Four eyes: the other approvers' signatures over the same digest and revision.
    co_signatures: Annotated[list[CoSignature], Field(max_length=MAX_CO_SIGNATURES)] | None = None


class Sandbox(StrictModel):
    """Faults per downstream, consumed by the sandbox one entry per call (docs/design.md §8)."""

    faults: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("faults")
    @classmethod
    def _known_downstreams_and_faults(cls, faults: dict[str, list[str]]) -> dict[str, list[str]]:
        # The case contract's vocabulary (saga.fault_plan); its message names the bad entry.
        validate_fault_plan(faults)
        for downstream, names in faults.items():
            if len(names) > MAX_FAULTS_PER_DOWNSTREAM:
                raise ValueError(
                    f"{downstream}: at most {MAX_FAULTS_PER_DOWNSTREAM} faults per downstream"
                )
        return faults

    def faults_for(self, downstream: str) -> list[str]:
        return list(self.faults.get(downstream, []))


class CaseParameters(StrictModel):
    """What a case asks for: the part of it an approval covers (with the approval's revision)."""

    case_id: CaseId
    tenant_id: TenantId
    order: Order
    reserve: Reserve
    refund: Refund
    shipment: Shipment

    @field_validator("tenant_id")
    @classmethod
    def _owns_agent_case_id(cls, tenant_id: str, info: ValidationInfo) -> str:
        """An agent case id (`agt_<tenant>_...`) is its tenant's alone (docs/design.md §10):
        no other tenant's case runs under it, so none can pass for that tenant's agent case."""
        case_id = info.data.get("case_id")
        owner = agent_namespace(case_id) if isinstance(case_id, str) else None
        if owner is not None and owner != tenant_id:
            whose = f"tenant {owner}'s" if owner else "no tenant's"
            raise ValueError(
                f"case id {case_id} is {whose} agent case id ({AGENT_CASE_PREFIX}<tenant>_...); "
                f"a case of tenant {tenant_id} cannot use it: choose another case id"
            )
        return tenant_id


CASE_PARAMETERS = tuple(CaseParameters.model_fields)  # known at class creation: nothing built


class Case(CaseParameters):
    approval: Approval
    sandbox: Sandbox = Field(default_factory=Sandbox)

    def signed_approval(self) -> SignedApproval:
        """What the approval's signature covers and carries (saga.approvals)."""
        approval = self.approval
        return SignedApproval(
            case_id=self.case_id,
            tenant_id=self.tenant_id,
            digest=approval.digest,
            revision=approval.revision,
            approved_by=approval.approved_by,
            signed_at=approval.signed_at,
            key_id=approval.key_id,
            signature=approval.signature,
            start_by=approval.start_by,
        )

    def signed_approvals(self) -> CaseApprovals:
        """Every signature the approval carries (the first signer's, then each co-signature),
        with the refund four eyes reads (saga.four_eyes)."""
        first = self.signed_approval()
        others = tuple(
            SignedApproval(
                case_id=self.case_id,
                tenant_id=self.tenant_id,
                digest=first.digest,
                revision=first.revision,
                approved_by=co.approved_by,
                signed_at=co.signed_at,
                key_id=co.key_id,
                signature=co.signature,
                start_by=co.start_by,
            )
            for co in self.approval.co_signatures or ()
        )
        return CaseApprovals(
            (first, *others),
            currency=self.refund.currency,
            amount_minor=self.refund.amount_minor,
        )

    def to_json(self) -> dict[str, Any]:
        """The normalized case as the state machine carries it (an approval's absent optional
        fields stay absent)."""
        case = self.model_dump(mode="json")
        case["approval"] = self.approval.model_dump(mode="json", exclude_none=True)
        return case


class ApprovedParameters(CaseParameters):
    """The part of a case the approval digest covers (everything but approval and sandbox)."""

    revision: Annotated[int, Field(ge=1, le=MAX_REVISION)]


def approval_digest(case: Case | Mapping[str, Any]) -> str:
    """`sha256:` + hex SHA-256 of the canonical JSON of the approved parameters.

    Accepts a parsed `Case` or a raw case mapping (for `sagactl case approve`, where the digest is
    still missing or stale); the raw mapping's approved parameters are validated first.
    """
    if isinstance(case, Case):
        parameters = ApprovedParameters(
            **{name: getattr(case, name) for name in CASE_PARAMETERS},
            revision=case.approval.revision,
        )
    else:
        approval = case.get("approval")
        raw = {name: case.get(name) for name in CASE_PARAMETERS}
        raw["revision"] = approval.get("revision") if isinstance(approval, Mapping) else None
        parameters = parse_model(ApprovedParameters, raw, what="case")
    return "sha256:" + sha256_hex(parameters.model_dump(mode="json"))


def with_approval_digest(case: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a raw case with `approval.digest` filled in, then checked as a whole case."""
    approved = dict(case)
    approval = dict(case.get("approval") or {})
    approval["digest"] = approval_digest(case)
    approved["approval"] = approval
    parse_case(approved)
    return approved


def verify_approval(case: Case) -> None:
    """Refuse a case whose parameters are not exactly the approved ones."""
    expected = approval_digest(case)
    if case.approval.digest != expected:
        raise ApprovalMismatch(
            f"case {case.case_id}: approval.digest does not match the case parameters "
            f"(approved revision {case.approval.revision}); re-approve the case"
        )


# --- tool payloads ------------------------------------------------------------------------------
class AttemptInfo(StrictModel):
    """One delivery of a task, as the state machine describes it (never an action identity)."""

    execution: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    state: Annotated[str, StringConstraints(min_length=1, max_length=80)]
    retry: Annotated[int, Field(ge=0)]
    redrive: Annotated[int, Field(ge=0)] | None = None
    # $states.context.Execution.StartTime: with the ARN, it tells a redrive (same start) from a
    # new execution under a reused name (ValidateCase binds the case record to both).
    started: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None

    def attempt_id(self, request_id: str) -> str:
        """`execution#state#redrive#retry:request_id`: unique per delivery, used as lease owner."""
        return f"{self.execution}#{self.state}#{self.redrive or 0}#{self.retry}:{request_id}"


class ValidatePayload(StrictModel):
    """ValidateCase gets the raw execution input; the case is parsed by the tool itself so that
    its messages name fields as they appear in the case file (`refund.amount_minor`)."""

    case: dict[str, Any]
    attempt: AttemptInfo


class ToolPayload(StrictModel):
    case: Case
    attempt: AttemptInfo


class ReconcilePayload(ToolPayload):
    step: Step


class OutcomePayload(StrictModel):
    case: Case
    outcome: Outcome
    steps: dict[str, Any] = Field(default_factory=dict)
    compensations: list[Any] = Field(default_factory=list)
    escalation: dict[str, Any] | None = None
    attempt: AttemptInfo  # names the execution that owns the case record


# --- tool results -------------------------------------------------------------------------------
class ActionRef(StrictModel):
    action_id: str
    action_key: str


class CaseActions(StrictModel):
    reserve: ActionRef
    refund: ActionRef
    ship: ActionRef
    release: ActionRef


class ValidateResult(StrictModel):
    """A case accepted for its owning execution (a duplicate is saga.errors.DuplicateExecution)."""

    case: dict[str, Any]
    actions: CaseActions


class StepResult(StrictModel):
    """What every ledger-guarded step returns to the state machine."""

    action_key: str
    status: Literal["COMPLETED"]
    downstream_ref: str | None
    result: dict[str, Any]
    replayed: bool
    reconciled: bool
    attempts: int

    @classmethod
    def of(cls, outcome: "ActionOutcome") -> "StepResult":
        return cls(
            action_key=outcome.action_key,
            status="COMPLETED",
            downstream_ref=outcome.downstream_ref,
            result=outcome.result,
            replayed=outcome.replayed,
            reconciled=outcome.reconciled,
            attempts=outcome.attempts,
        )


class ReconcileResult(StrictModel):
    step: Step
    decision: Literal["RESUME", "RETRY", "ESCALATE"]
    reason: str
    result: StepResult | None
    attempts: int
    budget: int


class OutcomeResult(StrictModel):
    case_id: str
    outcome: Outcome
    steps: dict[str, Any]
    compensations: list[Any]
    escalation: dict[str, Any] | None


# --- parsing ------------------------------------------------------------------------------------
ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_model(model: type[ModelT], data: Any, *, what: str) -> ModelT:
    """Validate `data` as `model`; failures become one `InvalidRequest` naming every field."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"invalid {what}: expected a JSON object, got {type(data).__name__}")
    try:
        # pydantic itself, as Powertools' `parse` does for a dict without an envelope; importing
        # its parser package would build every event-source model at cold start (~70 ms).
        parsed = model.model_validate(dict(data))
    except ValidationError as exc:
        raise InvalidRequest(f"invalid {what}: {describe_errors(exc)}") from None
    return parsed


def parse_case(data: Any) -> Case:
    return parse_model(Case, data, what="case")


def describe_errors(exc: ValidationError) -> str:
    """`refund.amount_minor: Input should be greater than or equal to 1; ...` (no input echo).
    A location that is not a field's name (an extra field's, as the caller wrote it) is quoted
    with repr: its control characters reach an operator's terminal written out."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        path = ".".join(_location(item) for item in error["loc"]) or "<root>"
        parts.append(f"{path}: {error['msg']}")
    return "; ".join(parts)


def _location(item: str | int) -> str:
    return str(item) if isinstance(item, int) or item.isidentifier() else repr(item)
