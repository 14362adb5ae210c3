"""Shared helpers for the sagactl CLI tests: run the CLI in-process against the local AWS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from local_aws.environment import LocalAws
from sagactl.cli import main
from sagactl.paths import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "examples"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        """sagactl's JSON document. In-process Lambda handlers (the emulator runs them in this
        process) print one-line JSON logs to the same stdout; sagactl's document is indented,
        so it starts at a line that is exactly `{`."""
        lines = self.out.splitlines()
        starts = [index for index, line in enumerate(lines) if line == "{"]
        if not starts:
            return json.loads(self.out)
        return json.loads("\n".join(lines[starts[-1] :]))

    def json_lines(self, *keys: str) -> list[dict[str, Any]]:
        """The JSON Lines objects with one of `keys` (handler log lines are skipped)."""
        found = []
        for line in self.out.splitlines():
            if line.startswith("{"):
                value = json.loads(line)
                if any(key in value for key in keys):
                    found.append(value)
        return found


class Sagactl:
    """`sagactl ARGS...` in this process (the installed entry point's `main`)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def __call__(self, *argv: str) -> Result:
        self._capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = self._capsys.readouterr()
        return Result(code, captured.out, captured.err)


@pytest.fixture
def sagactl(capsys: pytest.CaptureFixture[str]) -> Sagactl:
    return Sagactl(capsys)


@pytest.fixture
def saga(
    local_aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalAws]:
    """The real stack in a fresh local account, its outputs where sagactl looks for them."""
    outputs = tmp_path / "outputs.json"
    local_aws.write_outputs(outputs)
    monkeypatch.setenv("SAGA_LOCAL_OUTPUTS", str(outputs))
    yield local_aws


def example(name: str) -> Path:
    return EXAMPLES / f"{name}.json"


def run_example(sagactl: Sagactl, local: LocalAws, name: str) -> dict[str, Any]:
    """`sagactl start examples/<name>.json`, then wait for the execution to end."""
    started = sagactl("start", str(example(name)), "--json")
    assert started.code == 0, started.err
    report: dict[str, Any] = started.json()
    local.wait_for_execution(report["execution_arn"], timeout_seconds=120)
    return report


def executions(local: LocalAws) -> list[dict[str, Any]]:
    sfn = local.client("stepfunctions")
    listed: list[dict[str, Any]] = sfn.list_executions(
        stateMachineArn=local.outputs["StateMachineArn"]
    )["executions"]
    return listed


def get_item(local: LocalAws, output_key: str, key: dict[str, Any]) -> dict[str, Any]:
    """The item under `key` in the table that stack output `output_key` names; it must exist."""
    item: dict[str, Any] = local.client("dynamodb").get_item(
        TableName=local.outputs[output_key], Key=key, ConsistentRead=True
    )["Item"]
    return item


def scan(local: LocalAws, output_key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = local.client("dynamodb").scan(
        TableName=local.outputs[output_key]
    )["Items"]
    return items
