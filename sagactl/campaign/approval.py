"""The approval step of a generated case, in one place.

Today a case is approved by its digest (`saga.models.with_approval_digest`, as `examples/` and
the tests are). Signed approvals will replace this function's body; every generated case goes
through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.models import with_approval_digest

# A digest that no parameters have: for cases that must be refused before any digest matters.
UNAPPROVABLE_DIGEST = "sha256:" + "0" * 64


def approve(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case with its approval filled in, as the approver would sign it."""
    return with_approval_digest(case)


def unapproved(case: Mapping[str, Any]) -> dict[str, Any]:
    """A case that cannot be approved (its fields do not validate): a placeholder approval."""
    approved = dict(case)
    approved["approval"] = {**dict(case.get("approval") or {}), "digest": UNAPPROVABLE_DIGEST}
    return approved
