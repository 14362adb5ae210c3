"""Text and JSON of the views the commands print (no AWS calls here): the case view of
`status`, `watch` and the demo, ledger records, timeline lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TextIO

from sagactl.views.case import CaseView
from sagactl.views.plain import plain
from sagactl.views.redrive import RedrivePlan
from sagactl.views.timeline import TimelineEntry
from sagactl.views.untrusted import visible, visible_lines


def emit_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(plain(value), indent=2, sort_keys=True, default=str), file=out or sys.stdout)


def emit_json_line(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(plain(value), sort_keys=True, default=str), file=out or sys.stdout, flush=True)


def _clock(timestamp: str) -> str:
    """`HH:MM:SS.mmm` of an ISO timestamp (the date is in the execution header)."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def entry_line(entry: TimelineEntry) -> str:
    return visible(f"  {_clock(entry.timestamp):<12}  {entry.text}")


def timeline_lines(entries: Iterable[TimelineEntry]) -> list[str]:
    return [entry_line(entry) for entry in entries]


def _age(epoch: float, now: float) -> str:
    delta = epoch - now
    return f"in {delta:.0f}s" if delta >= 0 else f"{-delta:.0f}s ago"


def record_lines(record: dict[str, Any], indent: str = "    ", *, now: float) -> list[str]:
    """A ledger record, the fields an operator needs first (`now`: the target's, for the lease)."""
    if record.get("resolution") or record["status"] == "SETTLED":
        # A person decided it: it is never dispatched again, whatever budget is left.
        attempts = f"{record['attempts']} (settled: no more attempts)"
    else:
        attempts = f"{record['attempts']}/{record['budget']} ({record['remaining_budget']} left)"
    lines = [f"{indent}status          {record['status']}", f"{indent}attempts        {attempts}"]
    for name in ("downstream_ref", "business_ref", "compensates", "owner"):
        # the owner only matters while the action is open
        if name == "owner" and record["status"] not in ("IN_PROGRESS", "UNKNOWN"):
            continue
        if record.get(name):
            lines.append(f"{indent}{name:<15} {record[name]}")
    if record["status"] in ("IN_PROGRESS", "UNKNOWN") and record.get("lease_expires_at"):
        lines.append(f"{indent}lease ends      {_age(float(record['lease_expires_at']), now)}")
    if record.get("error"):
        error = record["error"]
        lines.append(f"{indent}error           {error.get('type')}: {error.get('message')}")
    resolution = record.get("resolution")
    if resolution:
        lines.append(f"{indent}settled         by {resolution.get('by')} at {resolution.get('at')}")
    return [visible(line) for line in lines]


def case_view_text(view: CaseView, *, with_timeline: bool = True) -> str:
    lines = _header_lines(view)
    if with_timeline:
        lines += ["", "timeline:", *timeline_lines(view.timeline)]
    if view.failed_step:
        step = view.failed_step
        operation = f" ({step.operation} action)" if step.operation else ""
        lines.append(f"  failed in {step.state}{operation}")
    lines += _action_lines(view)
    lines += _effect_lines(view)
    lines += _compensation_lines(view)
    lines += _escalation_lines(view)
    lines += ["", f"outcome: {view.outcome or 'no case record'}" + _outcome_note(view)]
    return visible_lines(lines)


def _header_lines(view: CaseView) -> list[str]:
    tenant = f" (tenant {view.tenant_id})" if view.tenant_id else ""
    lines = [f"case {view.case_id}{tenant}"]
    execution = view.execution
    if not execution:
        return [*lines, "  execution  none found (the case record exists)"]
    status = execution["status"]
    if execution.get("redriveCount"):
        status += f" (redriven {execution['redriveCount']}x)"
    lines += [
        f"  execution  {execution['executionArn']}",
        f"  status     {status}",
        f"  started    {execution.get('startDate')}",
    ]
    if execution.get("stopDate"):
        lines.append(f"  stopped    {execution['stopDate']}")
    if execution.get("error"):
        lines.append(f"  error      {execution['error']}: {execution.get('cause')}")
    if view.console_url:
        lines.append(f"  console    {view.console_url}")
    return lines


def _action_lines(view: CaseView) -> list[str]:
    lines = ["", f"actions (ledger, budget {view.attempt_budget} attempts each):"]
    if not view.actions:
        lines.append("  (tenant unknown: no ledger keys to read)")
    for action in view.actions:
        lines.append(f"  {action.step:<8} {action.action_key}")
        lines += record_lines(action.record, now=view.now) if action.record else ["    no record"]
    return lines


def _effect_lines(view: CaseView) -> list[str]:
    lines = ["", "effects (sandbox downstreams):"]
    effects = view.effects
    for name in ("refunds", "shipments"):
        count = effects.get(name)
        lines.append(f"  {name:<11} {'not deployed' if count is None else count}")
    if "reservation" in effects:
        reservation = effects["reservation"]
        text = "none" if reservation is None else f"{reservation.get('status')}"
        if reservation and reservation.get("released_by"):
            text += f" (released by {reservation['released_by']})"
        lines.append(f"  reservation {text}")
    return lines


def _compensation_lines(view: CaseView) -> list[str]:
    """Finished compensations from the execution; an open one from the ledger (unfinished work
    the execution output cannot show, e.g. a release whose retries ran out)."""
    lines = [f"  {_compact(item)}" for item in view.compensations]
    for action in view.actions:
        record = action.record
        if action.step != "release" or not record or record.get("status") == "COMPLETED":
            continue
        resolution = record.get("resolution")
        if record.get("status") == "SETTLED" or resolution:  # a person decided it: finished
            by = f" by {resolution.get('by')} at {resolution.get('at')}" if resolution else ""
            lines.append(f"  {record.get('status')} {action.action_key} (settled{by})")
        else:
            lines.append(
                f"  {record.get('status')} {action.action_key} (unfinished: attempts "
                f"{record.get('attempts')}/{view.attempt_budget})"
            )
    return ["", "compensations:", *(lines or ["  none"])]


def _escalation_lines(view: CaseView) -> list[str]:
    lines = ["", "escalation:"]
    escalation = view.escalation
    if escalation:
        lines.append(f"  reason     {escalation.get('reason')} (step {escalation.get('step')})")
        if escalation.get("detail"):
            lines.append(f"  detail     {escalation['detail']}")
        if escalation.get("decision_needed"):
            lines.append(f"  decision   {escalation['decision_needed']}")
    else:
        lines.append("  none")
    if view.escalation_queue_depth is not None:
        lines.append(f"  queue      {view.escalation_queue_depth} message(s) waiting (all cases)")
    return lines


def _outcome_note(view: CaseView) -> str:
    """What comes next, as `redrive` and `escalations` would say it (one verdict for all)."""
    resolution = view.resolution
    if resolution is not None:
        return (
            f" (resolved by {resolution.get('by')} at {resolution.get('at')}: a person's "
            f"decision is final; `sagactl escalations show {view.case_id}`)"
        )
    if view.status == "RUNNING":
        return " (the execution is still running)"
    if view.rejection:
        return f": {view.rejection}"
    unfinished = view.outcome in ("IN_PROGRESS", "COMPENSATION_PENDING")
    if view.redrive is None or not unfinished:
        return ""
    work = "a compensation" if view.outcome == "COMPENSATION_PENDING" else "the saga"
    if view.redrive["can_help"]:
        return f" ({work} did not finish: `sagactl redrive {view.case_id}` reruns it)"
    return (
        f" ({work} did not finish and a redrive cannot help: {view.redrive['reason']}; settle "
        f"it by hand and resolve it: `sagactl escalations show {view.case_id}`)"
    )


def _compact(item: Any) -> str:
    if isinstance(item, dict) and "action_key" in item:
        return f"{item.get('status')} {item['action_key']} (attempts {item.get('attempts')})"
    return json.dumps(plain(item), sort_keys=True)


def plan_lines(plan: RedrivePlan) -> list[str]:
    """What `sagactl redrive` (and the demo) show before redriving."""
    lines = [f"case {plan.case_id}: execution {plan.status} (stopped {plan.stopped_at})"]
    step = plan.failed_step
    if step is None:
        lines.append("  failed state: not found in the history")
    else:
        lines.append(
            f"  will rerun:   {step.state}"
            + (f" ({step.error}: {step.cause})" if step.error else "")
        )
    for action in plan.actions:
        lines.append(
            f"  action:       {action['action_key']} {action['status'] or 'no record'}, "
            f"attempts {action['attempts']}/{action['budget']} "
            f"({action['remaining_budget']} left)"
        )
    lines.append(f"  redrive:      #{plan.redrive_count + 1}; states that succeeded are not rerun")
    return [visible(line) for line in lines]
