"""docs/ceilings.md's flow does what the page shows: configure a daily refund ceiling, a case
refused by it, the limits, the escalation and its resolution (docs/design.md §3.12).

The page's ```json block is the `refund_ceilings` a reader adds to cdk.json: the stack is
synthesized with it (as `cdk synth` reads cdk.json's context) and provisioned in a fresh local
AWS. Then its `console local` blocks run in order, as tests/cli/test_readme_commands.py runs
the README's (the same marker, the same output comparison: tests/cli/readme_output.py), and
every `$ sagactl ...` line must parse.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from local_aws.emulator import LocalServer, client_environment
from local_aws.environment import LocalAws, StackSource
from local_aws.template import load_template
from sagactl.cli import build_parser
from sagactl.paths import PROJECT_ROOT
from tests.cli.test_readme_commands import readme_commands, run_and_compare
from tests.infra.synth import synthesize

PAGE = PROJECT_ROOT / "docs" / "ceilings.md"
BIN = Path(sys.executable).parent
_JSON_BLOCK = re.compile(r"^```json\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)


def page_ceilings(text: str) -> dict[str, Any]:
    """The `refund_ceilings` the page tells the reader to put in cdk.json's context."""
    for block in _JSON_BLOCK.finditer(text):
        value = json.loads("{" + block.group("body").strip().rstrip(",") + "}")
        if "refund_ceilings" in value:
            ceilings: dict[str, Any] = value["refund_ceilings"]
            return ceilings
    raise AssertionError(f"{PAGE.name} has no ```json block with refund_ceilings")


def test_every_sagactl_line_of_the_page_parses() -> None:
    commands = readme_commands(PAGE.read_text(encoding="utf-8"))
    assert any(c.run for c in commands), f"{PAGE.name} has no ```console local block"
    parser = build_parser()
    for command in commands:
        words = shlex.split(command.text)
        if words[0] == "sagactl":
            parser.parse_args(words[1:])  # SystemExit(2) on drift


def test_the_ceiling_flow_runs_as_the_page_shows(
    local_server: LocalServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    synth = synthesize(tmp_path / "cdk.out", {"refund_ceilings": page_ceilings(text)})
    source = StackSource(load_template(synth.template_path), synth.saga.stack.stack_name)
    local = LocalAws(server=local_server, source=source)
    local.reprovision()
    for name, value in client_environment(local.endpoint).items():
        monkeypatch.setenv(name, value)
    outputs = tmp_path / "outputs.json"
    local.write_outputs(outputs)
    env = {
        **os.environ,
        **local.environment,
        **local.outputs,
        "SAGA_LOCAL_OUTPUTS": str(outputs),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        "USER": "ada",
        "LOGNAME": "ada",
    }
    try:
        for command in readme_commands(text):
            if command.run:
                run_and_compare(command, env, local.endpoint, PAGE.name)
    finally:
        local.clock.reset()
