"""Random case plans from a seed: `generate(seed, index)` is a pure function of its arguments.

Parameters span their valid ranges (docs/design.md §8): quantities 1..1000, amounts 1..10^8 minor
units in any circulating ISO 4217 currency, any ISO 3166-1 country, references up to 128
characters, and names, street lines and cities of unicode text up to the carriers' limits
(`saga.formats` decides what is acceptable: the generator asks it). Some cases are
generated invalid, each with the error ValidateCase must give, their kinds going round so that
300 cases hold each a few times (`INVALID_KINDS`); a few are the four-eyes tenant's,
above its threshold, signed by two distinct approvers or not (campaign.approval). Cases are
grouped in blocks (one local account each): the block's stock levels come from the seed too, with
a hot SKU that runs out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from fault_campaign.approval import (
    CEILING_APPROVER,
    CEILING_TENANT,
    CEILINGS,
    PASSED_DEADLINE,
    SIGNED_AT,
    approve,
    four_eyes_case,
    unapproved,
)
from fault_campaign.overlap import plan_overlap
from fault_campaign.plan import MAX_EXECUTION_JUMPS_SECONDS, CasePlan
from fault_campaign.shapes import Shaped, operator, shape
from saga import formats
from stacks.lambda_errors import Death

# Tenants and their approvers as cdk.json configures them (ValidateCase's TENANTS).
TENANTS: dict[str, str] = {"acme": "supervisor@acme", "globex": "ops@globex"}
# Four eyes as cdk.json configures it (docs/design.md §9): hooli's approvers and thresholds.
FOUR_EYES_TENANT = "hooli"
FOUR_EYES_APPROVERS = ("controller@hooli", "cfo@hooli")
FOUR_EYES_THRESHOLDS: dict[str, int] = {
    "USD": 100_000,
    "EUR": 100_000,
    "GBP": 80_000,
    "JPY": 150_000,
}
FOUR_EYES_CHANCE = 0.08
HOT_SKU = "CMP-HOT"
UNSTOCKED_SKU = "CMP-NONE"
SKU_WEIGHTS: dict[str, int] = {"CMP-A": 50, "CMP-B": 20, "CMP-C": 10, HOT_SKU: 15, UNSTOCKED_SKU: 5}

_REFERENCE_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_REFERENCE_REST = _REFERENCE_FIRST + "._:-"
_POSTAL = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"
# Letters of many scripts, marks, digits, punctuation (quotes and backslashes included: the
# local AWS must carry them through JSONata), spaces and symbols outside the BMP.
_TEXT_POOLS: tuple[str, ...] = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "áàâäãåāąçćčďéèêëęěğíìîïıłńňñóòôöõøőřśšşťúùûüůűýÿźżžßæœ",
    "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΕΖΗΘ",
    "абвгдежзийклмнопрстуфхцчшщыэюяАБВГДЖЗ",
    "東京都大阪市北区中央一丁目山田花子",
    "서울특별시강남구테헤란로김민준",
    "القاهرةشارعمحمد",
    "תלאביברחובהרצל",
    "मुंबईनगरपथ",
    "กรุงเทพถนน",
    "\u0301\u0308\u0327",  # combining marks (printable)
    "0123456789",
    " .,-'/#&()\"\\",
    "📦🚚🏠✈️★",
)


def _text(rng: random.Random, limit: int) -> str:
    """Printable, not blank, at most `limit` characters (sometimes exactly `limit`)."""
    for _ in range(100):
        length = limit if rng.random() < 0.1 else rng.randint(1, limit)
        pools = rng.sample(_TEXT_POOLS, rng.randint(1, 3))
        text = "".join(rng.choice(rng.choice(pools)) for _ in range(length))
        if rng.random() < 0.05:
            text = " " + text[: limit - 2] + " "  # surrounding spaces: kept, never stripped
        if formats.text_problem(text, limit) is None:
            return text
    return "Ada Li"


def _reference(rng: random.Random) -> str:
    length = 128 if rng.random() < 0.05 else rng.randint(1, 24)
    return rng.choice(_REFERENCE_FIRST) + "".join(
        rng.choice(_REFERENCE_REST) for _ in range(length - 1)
    )


def _postal_code(rng: random.Random) -> str:
    for _ in range(100):
        length = rng.randint(1, formats.POSTAL_CODE_MAX)
        code = "".join(
            rng.choice(_POSTAL + (" -" if 0 < i < length - 1 else "")) for i in range(length)
        )
        if formats.postal_code_problem(code) is None:
            return code
    return "12345"


def _quantity(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.85:
        return rng.randint(1, 3)
    if roll < 0.97:
        return rng.randint(4, 60)
    return rng.randint(61, 1000)


def _amount(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.05:
        return rng.choice((1, 100_000_000))
    return int(10 ** rng.uniform(0, 8))


def parameters(seed: int, index: int) -> dict[str, Any]:
    """The case's parameters (no approval, no faults): a function of (seed, index)."""
    rng = random.Random(f"{seed}:params:{index}")
    tenant = rng.choice(sorted(TENANTS))
    skus = sorted(SKU_WEIGHTS)
    return {
        "case_id": f"c{index}-{rng.randrange(16**4):04x}",
        "tenant_id": tenant,
        "order": {"order_id": _reference(rng), "customer_id": _reference(rng)},
        "reserve": {
            "sku": rng.choices(skus, weights=[SKU_WEIGHTS[s] for s in skus])[0],
            "quantity": _quantity(rng),
        },
        "refund": {
            "payment_reference": _reference(rng),
            "amount_minor": _amount(rng),
            "currency": rng.choice(sorted(formats.CURRENCY_CODES)),
        },
        "shipment": {
            "address": {
                "name": _text(rng, formats.ADDRESS_TEXT_LIMITS["name"]),
                "line1": _text(rng, formats.ADDRESS_TEXT_LIMITS["line1"]),
                "city": _text(rng, formats.ADDRESS_TEXT_LIMITS["city"]),
                "postal_code": _postal_code(rng),
                "country": rng.choice(sorted(formats.COUNTRY_CODES)),
            }
        },
        "approval": {"revision": rng.choice((1, 1, 1, 2, 3)), "approved_by": TENANTS[tenant]},
    }


def block_stock(seed: int, block: int) -> dict[str, int]:
    """Stock levels of one block's account: plenty, some, little, and a hot SKU that runs out."""
    rng = random.Random(f"{seed}:stock:{block}")
    return {
        "CMP-A": 1_000_000,
        "CMP-B": rng.randint(200, 2000),
        "CMP-C": rng.randint(20, 200),
        HOT_SKU: rng.randint(0, 8),
    }


# --- faults --------------------------------------------------------------------------------------
_FAULTS_BY_DOWNSTREAM: dict[str, tuple[tuple[str, int], ...]] = {
    "reserve": (("fail_before_commit", 4), ("lose_response", 3), ("timeout", 3), ("reject", 1)),
    "refund": (
        ("fail_before_commit", 4),
        ("lose_response", 4),
        ("timeout", 3),
        ("in_flight", 3),
        ("reject", 1),
        ("unavailable", 1),
    ),
    "shipment": (
        ("fail_before_commit", 4),
        ("lose_response", 4),
        ("timeout", 3),
        ("reject", 1),
        ("unavailable", 1),
    ),
    "release": (("fail_before_commit", 3), ("lose_response", 3), ("timeout", 3), ("reject", 1)),
}
_DOWNSTREAM_CHANCE = {"reserve": 0.15, "refund": 0.3, "shipment": 0.3, "release": 0.2}


def _fault_list(rng: random.Random, downstream: str) -> list[str]:
    names = [name for name, _ in _FAULTS_BY_DOWNSTREAM[downstream]]
    weights = [weight for _, weight in _FAULTS_BY_DOWNSTREAM[downstream]]
    if rng.random() < 0.15:  # more than the retries of one run: the execution ends FAILED
        return ["fail_before_commit"] * rng.randint(4, 12)
    return rng.choices(names, weights=weights, k=rng.choices((1, 2, 3, 5), (6, 3, 2, 1))[0])


def _faults(rng: random.Random) -> dict[str, list[str]]:
    faults = {
        downstream: _fault_list(rng, downstream)
        for downstream, chance in _DOWNSTREAM_CHANCE.items()
        if rng.random() < chance
    }
    if "release" in faults and not any("reject" in f for f in faults.values()):
        # A release happens only after a rejection: make one happen.
        faults.setdefault("shipment", []).insert(0, "reject")
    return faults


# --- nemeses -------------------------------------------------------------------------------------
_TOOLS = (
    "ValidateCase",
    "ReserveStock",
    "IssueRefund",
    "CreateShipment",
    "ReconcileAction",
    "ReleaseReservation",
    "RecordOutcome",
)
_TABLE_OPERATIONS: dict[str, tuple[str, ...]] = {
    "ledger": ("PutItem", "UpdateItem", "TransactWriteItems", "GetItem", "*"),
    "cases": ("PutItem", "UpdateItem", "GetItem", "*"),
    "inventory": ("TransactWriteItems",),
    "reservations": ("TransactWriteItems", "GetItem"),
    "payments": ("TransactWriteItems",),
    "shipments": ("TransactWriteItems",),
    "sandbox": ("UpdateItem", "PutItem", "GetItem", "TransactWriteItems", "*"),
}
_READS = ("GetItem",)


_CRASH_ANSWERS = (Death.EXITED.value, Death.TIMED_OUT.value, "Lambda.ServiceException")


def _crash(rng: random.Random) -> dict[str, Any]:
    return {
        "kind": "crash",
        "effect": rng.choices(("refund", "shipment", "release", "reserve"), (35, 35, 20, 10))[0],
        "nth": 1,
        # How it died, or the invoke failing after it ran (one draw: later plans are unchanged).
        "answer": rng.choices(_CRASH_ANSWERS, (4, 3, 3))[0],
        # By the time anyone looks, the dead delivery's lease (at most 40 s) has run out.
        "jump": rng.choice((45, 60, 120)),
    }


def _invoke_error(rng: random.Random) -> dict[str, Any]:
    return {
        "kind": "invoke_error",
        "tool": rng.choice(_TOOLS),
        "error": rng.choice(("Lambda.ServiceException", "Lambda.TooManyRequestsException")),
        "skip": rng.randint(0, 1),
        "count": rng.choices((1, 2, 4), (6, 3, 1))[0],
    }


def _dynamodb(rng: random.Random, sku: str) -> dict[str, Any]:
    table = rng.choice(sorted(_TABLE_OPERATIONS))
    operation = rng.choice(_TABLE_OPERATIONS[table])
    errors = ["throttle", "conflict"] + ([] if operation in _READS else ["internal_after"])
    return {
        "kind": "dynamodb",
        "table": table,
        "operation": operation,
        "error": rng.choice(errors),
        # the hot SKU: every request on the SKU's inventory item, whichever case makes it
        "match": sku if table == "inventory" else "case",
        "skip": rng.randint(0, 4),
        "count": rng.choices((1, 2, 3, 6), (5, 3, 2, 1))[0],
    }


def _jumps(rng: random.Random) -> list[dict[str, Any]]:
    jumps: list[dict[str, Any]] = []
    total = 0
    for _ in range(rng.randint(1, 2)):
        seconds = rng.choice((45, 90, 300, 660, 1200))  # past leases, past token windows
        if total + seconds > MAX_EXECUTION_JUMPS_SECONDS:
            break
        total += seconds
        jumps.append({"kind": "jump", "at_request": rng.randint(1, 30), "seconds": seconds})
    return jumps


_REDRIVE_JUMPS = (0, 0, 60, 3600, 25 * 3600, 6 * 86400, 13 * 86400)
_RESUBMISSION_JUMPS = (0, 60, 3600, 2 * 86400, 31 * 86400, 95 * 86400)


def _redrives(rng: random.Random) -> list[dict[str, Any]]:
    rounds = rng.choices((1, 2, 3), (6, 3, 1))[0]
    plan = [{"jump": rng.choice(_REDRIVE_JUMPS), "heal": rng.random() < 0.5} for _ in range(rounds)]
    plan[-1]["heal"] = True  # the cause is removed before the last redrive at the latest
    return plan


# --- invalid cases -------------------------------------------------------------------------------
def _changed_after_approval(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    case = approve(raw)
    case["refund"] = {**case["refund"], "amount_minor": case["refund"]["amount_minor"] % 99 + 1}
    if case["refund"]["amount_minor"] == raw["refund"]["amount_minor"]:
        case["refund"]["amount_minor"] += 1
    return case, "ApprovalMismatch"


def _unknown_approver(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    raw["approval"]["approved_by"] = "mallory@" + raw["tenant_id"]
    return approve(raw), "AuthorizationDenied"


def _unknown_tenant(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    raw["tenant_id"] = "initech"
    return approve(raw), "AuthorizationDenied"


def _unsigned(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    case = approve(raw)  # a digest but no signature: never started unsigned
    for name in ("signature", "key_id"):
        case["approval"].pop(name)
    return case, "ApprovalInvalid"


def _forged(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    case = approve(raw)  # the signed fields changed after signing (a later revision claimed)
    case["approval"]["signed_at"] = SIGNED_AT.replace("2026", "2027")
    return case, "ApprovalInvalid"


def _impostor(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    other = next(t for t in TENANTS if t != raw["tenant_id"])  # the other tenant's approver
    return approve(raw, signer=(other, TENANTS[other])), "AuthorizationDenied"


def _colleague(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Another approver of the same tenant signs with their own key and presents it as the
    case's approver's (a key belongs to its own approver, §9): the four-eyes tenant, the only
    one with two approvers, below its threshold (one signature would be enough)."""
    raw["tenant_id"] = FOUR_EYES_TENANT
    raw["approval"]["approved_by"] = FOUR_EYES_APPROVERS[0]
    currency = rng.choice(sorted(FOUR_EYES_THRESHOLDS))
    raw["refund"]["currency"] = currency
    raw["refund"]["amount_minor"] = rng.randint(1, FOUR_EYES_THRESHOLDS[currency])
    signer = (FOUR_EYES_TENANT, FOUR_EYES_APPROVERS[1])
    return approve(raw, signer=signer), "AuthorizationDenied"


def _expired(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    return approve(raw, start_by=PASSED_DEADLINE), "ApprovalInvalid"  # its deadline has passed


def _bad_field(rng: random.Random, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    address = raw["shipment"]["address"]
    field, value = rng.choice(
        (
            ("name", "x" * (formats.ADDRESS_TEXT_LIMITS["name"] + 1)),
            ("line1", "   "),
            ("city", "Spring\nfield"),
            ("postal_code", "-1234"),
            ("country", "ZZ"),
        )
    )
    if rng.random() < 0.3:
        raw["refund"]["currency"] = rng.choice(("XXX", "HRK", "usd"))
    else:
        address[field] = value
    return unapproved(raw), "InvalidRequest"


# Each kind of invalid case and the rejection it must meet, in the order the kinds go round.
INVALID_KINDS: dict[str, Callable[[random.Random, dict[str, Any]], tuple[dict[str, Any], str]]] = {
    "digest": _changed_after_approval,
    "approver": _unknown_approver,
    "tenant": _unknown_tenant,
    "unsigned": _unsigned,
    "forged": _forged,
    "impostor": _impostor,
    "colleague": _colleague,
    "expired": _expired,
    "field": _bad_field,
}
INVALID_CHANCE = 0.06  # drawn from the plan's stream
# Drawn from a stream of its own (`{seed}:invalid:{index}`) for a case that would be valid and
# not four eyes: enough invalid cases that 300 hold every kind a few times.
EXTRA_INVALID_CHANCE = 0.08
# Per (seed, block size): how many invalid cases come before each index (computed once).
_INVALID_BEFORE: dict[tuple[int, int], list[int]] = {}


def _invalid(
    seed: int, index: int, ordinal: int, raw: dict[str, Any]
) -> tuple[dict[str, Any], str, str]:
    """The campaign's `ordinal`-th invalid case: the kinds go round, so each comes every
    len(INVALID_KINDS) invalid cases; what a kind draws comes from the case's own stream."""
    kind = tuple(INVALID_KINDS)[ordinal % len(INVALID_KINDS)]
    case, expect = INVALID_KINDS[kind](random.Random(f"{seed}:invalid-kind:{index}"), raw)
    return case, expect, kind


def _role(seed: int, index: int, block_size: int, rng: random.Random, eyes: random.Random) -> str:
    """What case `index` is: `twin`, `invalid`, `four-eyes` or `valid`. Takes the plan stream's
    first draw (`rng`) and the four-eyes stream's (`eyes`) as they always were."""
    if is_twin(seed, index, block_size) and not is_twin(seed, index - 1, block_size):
        return "twin"
    if rng.random() < INVALID_CHANCE:
        return "invalid"
    if is_twin(seed, index + 1, block_size):
        return "valid"  # a twin repeats the parameters as drawn
    if eyes.random() < FOUR_EYES_CHANCE:
        return "four-eyes"
    if random.Random(f"{seed}:invalid:{index}").random() < EXTRA_INVALID_CHANCE:
        return "invalid"
    return "valid"


def _invalid_before(seed: int, index: int, block_size: int) -> int:
    """How many of the campaign's cases before `index` are invalid."""
    counts = _INVALID_BEFORE.setdefault((seed, block_size), [0])
    while len(counts) <= index:
        earlier = len(counts) - 1
        role = _role(
            seed,
            earlier,
            block_size,
            random.Random(f"{seed}:plan:{earlier}"),
            random.Random(f"{seed}:four-eyes:{earlier}"),
        )
        counts.append(counts[-1] + (role == "invalid"))
    return counts[index]


# --- the daily refund ceiling (docs/design.md §3.12) ---------------------------------------------
# Drawn from a stream of its own (`{seed}:ceiling:{index}`) for a valid case that no twin repeats:
# the case becomes the ceiling tenant's, every other draw of the seed as it was.
CEILING_CHANCE = 0.2
# Of those: above the day's ceiling, or in a currency the tenant has none for (fail closed):
# ValidateCase refuses both for good (AuthorizationDenied).
CEILING_ABOVE_CHANCE = 0.08
CEILING_CURRENCY_CHANCE = 0.05


def _ceiling_case(seed: int, index: int, raw: dict[str, Any]) -> str | None:
    """Make `raw` the ceiling tenant's, or leave it (None). Its refund mostly 35% to 75% of the
    day's ceiling, so that a second one in a day is often refused (what passes is what
    the counter says; the invariants check it from the campaign's own log of claims); the
    `invalid` kind of an amount above the ceiling or a currency without one, else ''."""
    rng = random.Random(f"{seed}:ceiling:{index}")
    if rng.random() >= CEILING_CHANCE:
        return None
    raw["tenant_id"] = CEILING_TENANT
    raw["approval"]["approved_by"] = CEILING_APPROVER
    currency = rng.choice(sorted(CEILINGS))
    ceiling = CEILINGS[currency]
    roll = rng.random()
    kind = ""
    if roll < CEILING_ABOVE_CHANCE:
        amount, kind = rng.randint(ceiling + 1, 3 * ceiling), "ceiling"
    elif roll < CEILING_ABOVE_CHANCE + CEILING_CURRENCY_CHANCE:
        currency = rng.choice(sorted(formats.CURRENCY_CODES - set(CEILINGS)))
        amount, kind = rng.randint(1, ceiling), "ceiling-currency"
    else:
        # A changed resubmission adds one (runner.changed_case): it stays within the ceiling.
        amount = rng.randint(ceiling * 35 // 100, ceiling * 75 // 100)
    raw["refund"]["currency"] = currency
    raw["refund"]["amount_minor"] = amount
    return kind


CEILING_NEXT_DAY_CHANCE = 0.15
CEILING_THROTTLED_GIVE_BACK_CHANCE = 0.15
_NEXT_DAY_SECONDS = 25 * 3600


def _ceiling_scenario(seed: int, index: int) -> dict[str, Any] | None:
    """For some of the ceiling tenant's cases (a stream of their own), a scenario of the give-back
    (§3.12), alone in the case (no other fault, nemesis, duplicate or person), else None:
    - `next-day`: a refund charged on one UTC day and refused by the provider on the next: its
      retries fail before committing (the record stays open, charged), the execution fails, and
      the redrive a day later meets the refusal. The amount comes back to the day it charged;
    - `throttled-give-back`: the provider refuses, and DynamoDB throttles the transaction that
      records the refusal with the give-back (the case's third ledger transaction): nothing is
      written, and the refusal is recorded with its give-back by a later delivery, or the
      refund re-attempted happens and the counter keeps its amount."""
    rng = random.Random(f"{seed}:ceiling-next-day:{index}")
    roll = rng.random()
    if roll < CEILING_NEXT_DAY_CHANCE:
        deliveries = 4  # IssueRefund's retries in one run (cdk.json retry.tool: 3 retries)
        return {
            "faults": {"refund": ["fail_before_commit"] * deliveries + ["reject"]},
            "nemeses": [],
            "redrives": [{"jump": _NEXT_DAY_SECONDS, "heal": False}],
        }
    if roll < CEILING_NEXT_DAY_CHANCE + CEILING_THROTTLED_GIVE_BACK_CHANCE:
        throttle = {
            "kind": "dynamodb",
            "table": "ledger",
            "operation": "TransactWriteItems",
            "error": "throttle",
            "match": "case",
            # the case's third ledger transaction: after the reservation's and the refund's
            # claim with its charge, the refusal's record (with its give-back)
            "skip": 2,
            "count": 3,  # every attempt of the Lambda's client (saga.aws: 3 at most)
        }
        return {"faults": {"refund": ["reject"]}, "nemeses": [throttle], "redrives": []}
    return None


# --- the plan ------------------------------------------------------------------------------------
def is_twin(seed: int, index: int, block_size: int) -> bool:
    """Whether case `index` repeats the parameters of the case before it (same block only)."""
    if index % block_size == 0:
        return False
    return random.Random(f"{seed}:twin:{index}").random() < 0.05


def _nemeses(rng: random.Random, sku: str) -> list[dict[str, Any]]:
    nemeses: list[dict[str, Any]] = []
    if rng.random() < 0.14:
        nemeses.append(_crash(rng))
    if rng.random() < 0.08:
        nemeses.append(_invoke_error(rng))
    if rng.random() < 0.15:
        nemeses.append(_dynamodb(rng, sku))
    if rng.random() < 0.12:
        nemeses.extend(_jumps(rng))
    return nemeses


def _duplicate(rng: random.Random, *, rejected: bool) -> dict[str, Any] | None:
    """Another execution of the case: concurrent, later, under the same name, or later with
    changed parameters (only of a case that was not rejected)."""
    roll = rng.random()
    if roll < 0.04:
        return {"when": "concurrent"}
    if roll < 0.08:
        return {"when": "later", "jump": rng.choice(_RESUBMISSION_JUMPS)}
    if roll < 0.10:
        return {"when": "same_name"}
    if roll < 0.12 and not rejected:
        return {"when": "changed", "jump": rng.choice(_RESUBMISSION_JUMPS)}
    return None


def generate(seed: int, index: int, *, block_size: int) -> CasePlan:
    """The plan of case `index` of the campaign `seed` (blocks of `block_size` cases)."""
    rng = random.Random(f"{seed}:plan:{index}")
    raw = parameters(seed, index)
    twin_of: int | None = None
    expect: str | None = None
    four_eyes: str | None = None
    invalid: str | None = None
    ceiling: str | None = None  # the ceiling tenant's case: '' valid, else its invalid kind
    # Drawn from a stream of its own, so every other draw of the seed is as it was.
    eyes = random.Random(f"{seed}:four-eyes:{index}")
    role = _role(seed, index, block_size, rng, eyes)
    if role == "twin":
        twin_of = index - 1
        sibling = parameters(seed, index - 1)
        raw = {**sibling, "case_id": raw["case_id"]}
    if role == "invalid":
        ordinal = _invalid_before(seed, index, block_size)
        case, expect, invalid = _invalid(seed, index, ordinal, raw)
    elif role == "four-eyes":
        case, four_eyes, expect = four_eyes_case(eyes, raw)
    else:
        repeated = is_twin(seed, index + 1, block_size)  # a twin repeats the drawn parameters
        ceiling = None if role != "valid" or repeated else _ceiling_case(seed, index, raw)
        if ceiling:  # refused for good before anything is reserved
            invalid, expect = ceiling, "AuthorizationDenied"
        case = approve(raw)
    faults = _faults(rng)
    nemeses = _nemeses(rng, str(raw["reserve"]["sku"]))
    # Drawn from their own stream, so that adding a shape leaves the other draws as they were.
    extra = random.Random(f"{seed}:shape:{index}")
    shaped = Shaped()
    if expect is None:
        shaped = shape(extra, faults, str(raw["reserve"]["sku"]))
        nemeses += shaped.nemeses
        overlapping = plan_overlap(seed, index)  # its own random stream: the rest is unchanged
        shaped_overlap = any(n["kind"] == "overlap" for n in shaped.nemeses)
        if overlapping is not None and not shaped_overlap:  # one overlap a case
            nemeses.append(overlapping)
    if faults:
        case["sandbox"] = {"faults": faults}
    duplicate = _duplicate(rng, rejected=expect is not None)
    if shaped.operator is not None:  # a person's scenario: its own nemeses only
        nemeses, duplicate = list(shaped.nemeses), None
    redrives = _redrives(rng) if shaped.redrives is None else shaped.redrives
    person = shaped.operator if shaped.operator is not None else operator(extra)
    scenario = _ceiling_scenario(seed, index) if ceiling == "" else None
    if scenario is not None:  # the scenario alone: no other fault, nemesis, duplicate or person
        case["sandbox"] = {"faults": scenario["faults"]}
        nemeses, duplicate, redrives, person = scenario["nemeses"], None, scenario["redrives"], None
    return CasePlan(
        seed=seed,
        index=index,
        case=case,
        expect_rejection=expect,
        four_eyes=four_eyes,
        invalid=invalid,
        twin_of=twin_of,
        nemeses=nemeses,
        duplicate=duplicate,
        redrives=redrives,
        operator=person,
    )
