"""The ids a person types (a case, a tenant): checked before any call, so a malformed one is a
UsageError that says what an id looks like, never an AWS error or a traceback, and nothing is
sent. The patterns are the saga's own (saga.models)."""

from __future__ import annotations

import re

from saga.models import CASE_ID_PATTERN, TENANT_ID_PATTERN
from sagactl.errors import UsageError


def check_case_id(case_id: str) -> None:
    """A case id, or an execution's name (`case-7--r2`: the same characters, §2)."""
    if not re.fullmatch(CASE_ID_PATTERN, case_id):
        raise UsageError(f"{case_id!r} is not a case id (letters, digits, '-', '_'; at most 80)")


def check_tenant(tenant: str) -> None:
    if not re.fullmatch(TENANT_ID_PATTERN, tenant):
        raise UsageError(f"{tenant!r} is not a tenant id (lowercase letters, digits, '-')")
