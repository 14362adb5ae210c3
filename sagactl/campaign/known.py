"""Bugs the campaign found in code it may not fix itself (lambdas/saga), reported to the lead.

A violation that matches one of these is still a violation; the report counts it under its bug
so that a new one stands out. Remove an entry with the fix (its regression test in
tests/campaign/test_campaign_findings.py then passes instead of xfailing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    key: str
    summary: str
    invariant: str
    detail: re.Pattern[str]


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "reserve-sandbox-control-untyped",
        "ReserveStock reads the sandbox's fault cursor (an UpdateItem on the sandbox table) "
        "before the ledger, outside any error handling: a throttled or conflicting request fails "
        "the task at once with botocore's error type (TransactionConflictException, "
        "ProvisionedThroughputExceededException), which no Retry matches, instead of a "
        "TransientError that the tool policy retries. Fix in lambdas/saga/tools/reserve.py: "
        "treat a failed `faults.next()` as TransientError (nothing was sent), as the payment "
        "provider and the carrier do (saga.sandbox._common.draw_fault).",
        "failed_after_transient_retries",
        re.compile(r"FAILED at ReserveStock with (?!TransientError)\w+Exception"),
    ),
)


def known_bug(violation: dict[str, str]) -> str | None:
    for bug in KNOWN_BUGS:
        if violation.get("invariant") == bug.invariant and bug.detail.search(violation.get("detail", "")):
            return bug.key
    return None
