"""`sagactl local up` with a definition AWS would refuse: a message and exit 1, no traceback,
and no local AWS left running (the broken definition can never run locally)."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.local_stack_fixture import TEMPLATE

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _with_output(template: dict[str, Any], output: str) -> dict[str, Any]:
    broken = copy.deepcopy(template)
    machine = broken["Resources"]["StateMachineEEEE5555"]["Properties"]
    head, arn, tail = machine["DefinitionString"]["Fn::Join"][1]
    definition = json.loads(head + "ARN" + tail)
    definition["States"]["Done"]["Output"] = output
    text = json.dumps(definition)
    before, _, after = text.partition("ARN")
    machine["DefinitionString"] = {"Fn::Join": ["", [before, arn, after]]}
    return broken


def test_local_up_refuses_a_definition_aws_would_refuse(tmp_path: Path) -> None:
    template = tmp_path / "broken.template.json"
    template.write_text(
        json.dumps(_with_output(TEMPLATE, "{% 'the action\\'s reference' %}")), encoding="utf-8"
    )
    state = tmp_path / "state"
    up = ["up", "--port", str(_free_port()), "--template", str(template)]

    completed = subprocess.run(
        [str(BIN / "sagactl"), "local", "--state-dir", str(state), *up],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 1, completed.stderr
    last = completed.stderr.strip().splitlines()[-1]
    assert last == (
        "sagactl local: state machine StateMachineEEEE5555: Invalid State Machine Definition: "
        "'INVALID_JSONATA_EXPRESSION: Unsupported escape sequence: \\\"'\" at /States/Done/Output'"
    )
    assert "Traceback" not in completed.stderr
    assert not (state / "local.pid").exists()
