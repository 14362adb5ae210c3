"""What `sagactl start` reports about a case file's execution: started, found, or a duplicate.

Pure: sagactl.operations.executions.start_case reads and starts; these build its report.
"""

from __future__ import annotations

import json
from typing import Any

from sagactl.errors import InvalidCaseFile
from sagactl.views.case import execution_summary


def case_revision(raw: Any) -> int:
    """approval.revision of a case file (1 when it has none to read)."""
    approval = raw.get("approval") if isinstance(raw, dict) else None
    revision = approval.get("revision") if isinstance(approval, dict) else None
    if isinstance(revision, int) and not isinstance(revision, bool) and revision > 1:
        return revision
    return 1


def canonical_input(case: Any) -> str:
    return json.dumps(case, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def duplicate_report(
    raw: Any, case_id: str, record: dict[str, Any], console_url: str | None
) -> dict[str, Any]:
    """The report for a case whose record names another execution: nothing starts. A file
    with other approved parameters than the case that ran is an InvalidCaseFile."""
    digest = raw.get("approval", {}).get("digest") if isinstance(raw, dict) else None
    if record.get("digest") != digest:
        raise InvalidCaseFile(
            f"case {case_id} already ran with other approved parameters (digest "
            f"{record.get('digest')}); one case id is one approved request: use a new case id"
        )
    original = record.get("execution_arn")
    return {
        "case_id": case_id,
        "created": False,
        "duplicate": True,
        "execution_arn": original,
        "execution_name": original.rpartition(":")[2] if isinstance(original, str) else None,
        "revision": case_revision(raw),
        "status": None,
        "outcome": record.get("outcome"),
        "start_date": None,
        "stop_date": None,
        "same_input": True,
        "console_url": console_url,
    }


def execution_report(
    description: dict[str, Any],
    *,
    created: bool,
    payload: str,
    revision: int,
    console_url: str | None,
) -> dict[str, Any]:
    """The report for the execution of the file's name, started now or found."""
    summary = execution_summary(description)
    try:
        same_input = json.loads(description.get("input") or "null") == json.loads(payload)
    except ValueError:
        same_input = False
    case_input = json.loads(payload)
    return {
        "case_id": case_input.get("case_id") if isinstance(case_input, dict) else None,
        "created": created,
        "execution_arn": summary["executionArn"],
        "execution_name": summary.get("name"),
        "revision": revision,
        "status": summary["status"],
        "start_date": summary.get("startDate"),
        "stop_date": summary.get("stopDate"),
        "same_input": same_input,
        "console_url": console_url,
    }
