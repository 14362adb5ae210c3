"""The agent tools' inputs: one pydantic model per tool, the one source of each tool's strict
JSON Schema (what an MCP client sees) and of its validation (what the tool accepts).

Bounds are the case model's (saga.models, saga.formats): a value the schema admits
may still be refused by the case's own rules (a currency that is not circulating, a blank
address line), always as INVALID_REQUEST naming the field, before anything is written.
Descriptions are written for a model: what the value is, where it comes from, what not to do.
"""

# Annotations are evaluated as the classes are created (no `from __future__ import annotations`):
# pydantic evaluates every field annotation of a model anyway, and a postponed one is first
# compiled back from its string (about 3 ms of a tool's cold start: case, payload, environment).

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from saga.formats import ADDRESS_TEXT_LIMITS, POSTAL_CODE_MAX
from saga.models import (
    CASE_ID_PATTERN,
    MAX_AMOUNT_MINOR,
    MAX_QUANTITY,
    REFERENCE_PATTERN,
    SKU_PATTERN,
)

PROPOSE = "propose_replacement"
GET = "get_replacement"
START = "start_replacement"


class ToolInput(BaseModel):
    """Strict: unknown arguments refused, no coercion (an amount is a JSON integer)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _reference(description: str) -> Any:
    return Field(pattern=REFERENCE_PATTERN, min_length=1, max_length=128, description=description)


def _text(field: str, description: str) -> Any:
    return Field(min_length=1, max_length=ADDRESS_TEXT_LIMITS[field], description=description)


class AddressInput(ToolInput):
    name: Annotated[str, _text("name", "Recipient's name, as printed on the parcel.")]
    line1: Annotated[str, _text("line1", "Street and number.")]
    city: Annotated[str, _text("city", "City.")]
    postal_code: Annotated[
        str,
        Field(
            pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9 -]*[A-Za-z0-9])?$",
            min_length=1,
            max_length=POSTAL_CODE_MAX,
            description="Postal code: letters, digits, spaces and hyphens.",
        ),
    ]
    country: Annotated[
        str,
        Field(
            pattern=r"^[A-Z]{2}$",
            description="ISO 3166-1 alpha-2 country code in capitals, e.g. US, DE, JP.",
        ),
    ]


class ProposeInput(ToolInput):
    request_id: Annotated[
        str,
        _reference(
            "Your durable identity for THIS request, e.g. '<ticket id>:replacement-1'. Reuse "
            "exactly the same value when you retry after an error, a timeout or a restart: "
            "you get the same case back. Never use a tool-call id, a random value or a "
            "timestamp. A new value asks for a new, separate replacement."
        ),
    ]
    order_id: Annotated[str, _reference("The order whose item arrived damaged.")]
    customer_id: Annotated[str, _reference("The customer who placed that order.")]
    sku: Annotated[
        str,
        Field(
            pattern=SKU_PATTERN,
            min_length=1,
            max_length=64,
            description="The SKU to reserve and ship as the replacement.",
        ),
    ]
    quantity: Annotated[
        int, Field(ge=1, le=MAX_QUANTITY, description="Units to replace (a whole number).")
    ]
    payment_reference: Annotated[
        str, _reference("The payment of the damaged item, which is refunded.")
    ]
    amount_minor: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_AMOUNT_MINOR,
            description="Refund amount in minor units as an integer: 2000 means 20.00 USD.",
        ),
    ]
    currency: Annotated[
        str,
        Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 currency code, e.g. USD, EUR."),
    ]
    address: Annotated[AddressInput, Field(description="Where to ship the replacement.")]


class CaseIdInput(ToolInput):
    case_id: Annotated[
        str,
        Field(
            pattern=CASE_ID_PATTERN,
            min_length=1,
            max_length=80,
            description="The case id that propose_replacement returned.",
        ),
    ]


DESCRIPTIONS: dict[str, str] = {
    PROPOSE: (
        "Propose a replacement order for a customer whose item arrived damaged: reserve the "
        "SKU, refund the damaged item's payment, ship the replacement. Returns a draft case "
        "with status APPROVAL_PENDING and its case_id: nothing happens until a person approves "
        "it and you call start_replacement. Retry-safe: calling again with the same request_id "
        "and the same parameters returns the same case; the same request_id with different "
        "parameters is a CONFLICT (use a new request_id only for a genuinely new request). "
        "The tenant is fixed by this server; do not pass one."
    ),
    GET: (
        "Read where a replacement case stands: APPROVAL_PENDING (a person must approve it), "
        "APPROVED (call start_replacement), RUNNING (with the current step), COMPLETED, "
        "ESCALATED (a person must decide: reason and decision needed are given; "
        "REFUND_LIMIT_REACHED: nothing was refunded, the tenant's daily refund ceiling had no "
        "room, with `limit` {ceiling, used, asked, currency, day} in minor units), FAILED "
        "(whether a person's redrive is pending) or RESOLVED (a person decided: the decision, "
        "who and when; final). Safe to call as often as you like."
    ),
    START: (
        "Start an approved replacement case. Only a case whose approval a person signed can "
        "start (otherwise NOT_APPROVED). Retry-safe: calling it again for the same case_id "
        "returns the same execution and never starts a second one. Then follow it with "
        "get_replacement."
    ),
}

# MCP tool annotations (hints a host may use to decide whether to ask the person first): what
# each tool really does. get_replacement only reads; propose_replacement writes a draft (no
# effect anywhere, and a repeat returns the same draft); start_replacement starts the saga, whose
# refund and shipment reach the payment provider and the carrier (destructive, open world), and
# a repeat returns the same execution (idempotent). AgentCore Gateway's tool definitions have no
# field for them (name, description, inputSchema, outputSchema only): `sagactl mcp` serves them.
ANNOTATIONS: dict[str, dict[str, Any]] = {
    PROPOSE: {
        "title": "Propose a replacement",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    GET: {
        "title": "Follow a replacement",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    START: {
        "title": "Start an approved replacement",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": True,
    },
}

INPUTS: dict[str, type[ToolInput]] = {PROPOSE: ProposeInput, GET: CaseIdInput, START: CaseIdInput}
TOOL_NAMES = tuple(INPUTS)


def input_schema(tool: str) -> dict[str, Any]:
    """The tool's JSON Schema (Draft 2020-12, which pydantic writes): strict objects."""
    return INPUTS[tool].model_json_schema()


def tool_definitions() -> list[dict[str, Any]]:
    """name, description, inputSchema and annotations of every tool (MCP's Tool shape)."""
    return [
        {
            "name": name,
            "description": DESCRIPTIONS[name],
            "inputSchema": input_schema(name),
            "annotations": ANNOTATIONS[name],
        }
        for name in TOOL_NAMES
    ]
