"""A failing plan reduced to a minimal one: greedy removal, one element at a time.

The candidates, coarse first: drop the duplicate, each nemesis, each redrive round, each
downstream's fault list, then each single fault; a candidate is kept when the case, run alone
in a fresh account, still violates the same invariant. `fails(plan)` is the test (it runs the
case); the number of runs is bounded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from fault_campaign.plan import CasePlan


def _without_faults(plan: CasePlan, faults: dict[str, list[str]]) -> CasePlan:
    reduced = copy.deepcopy(plan)
    cleaned = {downstream: names for downstream, names in faults.items() if names}
    if cleaned:
        reduced.case["sandbox"] = {"faults": cleaned}
    else:
        reduced.case.pop("sandbox", None)
    return reduced


def candidates(plan: CasePlan) -> Iterator[CasePlan]:
    """Plans with one element fewer than `plan`, coarsest first."""
    if plan.duplicate is not None:
        reduced = copy.deepcopy(plan)
        reduced.duplicate = None
        yield reduced
    if plan.twin_of is not None:
        reduced = copy.deepcopy(plan)
        reduced.twin_of = None
        yield reduced
    for position in range(len(plan.nemeses)):
        reduced = copy.deepcopy(plan)
        del reduced.nemeses[position]
        yield reduced
    for position in range(len(plan.redrives)):
        reduced = copy.deepcopy(plan)
        del reduced.redrives[position]
        yield reduced
    faults = plan.faults
    for downstream in faults:
        yield _without_faults(plan, {**faults, downstream: []})
    for downstream, names in faults.items():
        for position in range(len(names)):
            yield _without_faults(
                plan, {**faults, downstream: names[:position] + names[position + 1 :]}
            )
    for position, round_ in enumerate(plan.redrives):
        if round_.get("jump"):
            reduced = copy.deepcopy(plan)
            reduced.redrives[position]["jump"] = 0
            yield reduced


def shrink(
    plan: CasePlan, fails: Callable[[CasePlan], bool], *, max_runs: int = 24
) -> tuple[CasePlan, int]:
    """The smallest plan found that still fails, and how many runs it took."""
    runs = 0
    current = plan
    progress = True
    while progress and runs < max_runs:
        progress = False
        for candidate in candidates(current):
            if runs >= max_runs:
                break
            runs += 1
            if fails(candidate):
                current = candidate
                progress = True
                break
    return current, runs
