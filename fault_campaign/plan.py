"""A case plan: everything the campaign does to one case, as plain JSON (replayable, shrinkable).

- `case`: the execution input (approved, with `sandbox.faults`: the fault plan over every
  downstream, docs/design.md §8);
- `expect_rejection`: the error ValidateCase must answer (a case generated invalid), else None;
- `invalid`: which way a case generated invalid is invalid (fault_campaign.generator's
  INVALID_KINDS: `digest`, `impostor`, `expired`, ...), else None;
- `four_eyes`: how a case above its tenant's four-eyes threshold was signed (`two` distinct
  approvers, `once`, `twice` by one, `forged`: a co-signature changed, `two-names`: one signer
  as two approvers, one key material under two names), else None;
- `twin_of`: the index of a case with equal parameters that runs just before this one;
- `nemeses`: faults the sandbox cannot give (fault_campaign.nemeses), each a dict with `kind`;
- `duplicate`: another execution of the case (`concurrent`, `later` after a jump, `same_name`,
  or `changed`: a resubmission with other parameters), or None;
- `redrives`: what happens while the owning execution ends FAILED: per round a clock jump (at
  most 14 days after the close) and whether the cause is removed first;
- `operator`: a person at work (fault_campaign.operator): `at` (`closed`: on the first close,
  before any redrive; `end`: after everything else) and `steps` in order (`sweep`, `jump` by
  `jump_days`, `resolve`, `redrive:sagactl`, `redrive:plain`, `late`, `release`), or None.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

DOWNSTREAMS = ("reserve", "refund", "shipment", "release")
MAX_REDRIVE_JUMP_SECONDS = 14 * 86400 - 3600  # inside Step Functions' 14-day redrive window
MAX_EXECUTION_JUMPS_SECONDS = 50 * 60  # inside the 60-minute execution timeout


@dataclass
class CasePlan:
    seed: int
    index: int
    case: dict[str, Any]
    expect_rejection: str | None = None
    four_eyes: str | None = None
    invalid: str | None = None
    twin_of: int | None = None
    nemeses: list[dict[str, Any]] = field(default_factory=list)
    duplicate: dict[str, Any] | None = None
    redrives: list[dict[str, Any]] = field(default_factory=list)
    operator: dict[str, Any] | None = None
    # Stock levels to seed when the case is replayed alone (the levels its account had).
    stock: dict[str, int] | None = None

    @property
    def case_id(self) -> str:
        return str(self.case["case_id"])

    @property
    def faults(self) -> dict[str, list[str]]:
        sandbox = self.case.get("sandbox") or {}
        return {k: list(v) for k, v in (sandbox.get("faults") or {}).items()}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CasePlan:
        return cls(**data)

    def fault_classes(self) -> list[str]:
        """Labels for the report: which kinds of fault this case met (sorted, unique)."""
        labels: set[str] = set()
        for downstream, faults in self.faults.items():
            for fault in faults:
                labels.add(f"{downstream}:{fault}")
        labels.update(_nemesis_label(nemesis) for nemesis in self.nemeses)
        if self.duplicate is not None:
            labels.add(f"duplicate:{self.duplicate['when']}")
            if self.duplicate.get("jump"):
                labels.add("jump:before-resubmission")
        if self.twin_of is not None:
            labels.add("twin")
        labels.update(self._approval_labels())
        for step in (self.operator or {}).get("steps", ()):
            labels.add(f"operator:{step}")
        if not labels:
            labels.add("clean")
        return sorted(labels)

    def _approval_labels(self) -> list[str]:
        """How the case was generated invalid or signed by four eyes, and what must refuse it."""
        return [
            f"{label}:{value}"
            for label, value in (
                ("rejection", self.expect_rejection),
                ("invalid", self.invalid),
                ("four-eyes", self.four_eyes),
            )
            if value is not None
        ]


def _nemesis_label(nemesis: dict[str, Any]) -> str:
    kind = nemesis["kind"]
    if kind == "dynamodb":
        return f"dynamodb:{nemesis['error']}"
    if kind == "invoke_error":
        return f"invoke:{nemesis['error']}"
    if kind == "crash":
        return f"crash:{nemesis['effect']}"
    if kind == "overlap":
        return f"overlap:{nemesis['how']}"
    if kind == "foreign_record":
        return f"foreign-record:{nemesis['operation']}"
    if kind == "legacy_retention":
        return f"legacy-retention:{nemesis['operation']}"
    return "jump:in-execution"
