"""The README's commands still match the tool (and the local ones still work).

Marker (agreed with the README author):
- A fenced block whose info string is `console` holds commands as `$ ` lines (a trailing `\\`
  continues a line); other lines are sample output and are ignored.
- Every `$ sagactl ...` command in such a block must parse with sagactl's own parser: an unknown
  command or flag fails this test (README drift).
- Blocks whose info string is `console local` are also RUN, in README order, against a fresh
  local AWS (the real stack): `$ sagactl ...` and `$ aws ...` commands, with AWS_ENDPOINT_URL,
  fake credentials and SAGA_LOCAL_OUTPUTS set, each stack output exported under its own name
  (`$StateMachineArn`, `$LedgerTableName`, ...), cwd = the project root. Each must exit 0, unless
  the line ends with `# exit N`. `sagactl local ...` commands are only parsed (the test brings
  its own local AWS).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagactl.cli import build_parser
from sagactl.local.environment import LocalAws
from sagactl.paths import PROJECT_ROOT
from tests.project import run_in_project

README = PROJECT_ROOT / "README.md"
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
_EXPECTED_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


@dataclass(frozen=True)
class Command:
    text: str  # the shell text, without the `$ ` prompt and the `# exit N` note
    run: bool  # from a `console local` block
    expected_exit: int
    line: int


def readme_commands(text: str) -> list[Command]:
    commands: list[Command] = []
    for block in _FENCE.finditer(text):
        info = block.group("info").strip().split()
        if not info or info[0] != "console":
            continue
        run = "local" in info[1:]
        first_line = text[: block.start("body")].count("\n") + 1
        pending: list[str] = []
        start = 0
        for offset, raw in enumerate(block.group("body").splitlines()):
            if not pending and not raw.startswith("$ "):
                continue
            if not pending:
                start = offset
            part = raw[2:] if not pending else raw
            pending.append(part.rstrip("\\").rstrip())
            if raw.endswith("\\"):
                continue
            joined = " ".join(piece.strip() for piece in pending)
            pending = []
            expected = _EXPECTED_EXIT.search(joined)
            joined = _EXPECTED_EXIT.sub("", joined)
            commands.append(
                Command(joined, run, int(expected.group(1)) if expected else 0, first_line + start)
            )
    return [c for c in commands if c.text.split()[0] in ("sagactl", "aws")]


def _documented_commands() -> list[Command]:
    """The README's commands; a README without any would silently test nothing, so it fails."""
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert any(c.text.startswith("sagactl") for c in commands), (
        "README.md has no ```console blocks with `$ sagactl ...` lines "
        "(see this module's docstring for the marker)"
    )
    return commands


def test_marker_parsing() -> None:
    text = (
        "```console\n$ sagactl status case-1 \\\n    --json\n{ output }\n```\n"
        "```console local\n$ sagactl redrive case-1 --yes   # exit 3\n$ ls\n```\n"
        "```bash\n$ sagactl not-parsed\n```\n"
    )
    assert readme_commands(text) == [
        Command("sagactl status case-1 --json", False, 0, 2),
        Command("sagactl redrive case-1 --yes", True, 3, 7),
    ]


def test_documented_sagactl_commands_parse() -> None:
    parser = build_parser()
    problems = []
    for command in _documented_commands():
        words = shlex.split(command.text)
        if words[0] != "sagactl":
            continue
        try:
            parser.parse_args(words[1:])
        except SystemExit as exc:
            if exc.code not in (0, None):  # `--help` exits 0
                problems.append(f"README.md:{command.line}: {command.text}")
    assert not problems, "README commands sagactl does not accept:\n" + "\n".join(problems)


def test_documented_local_commands_run(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    runnable = [
        c for c in _documented_commands() if c.run and not c.text.startswith("sagactl local")
    ]
    assert runnable, "README.md has no ```console local blocks to run"
    local_aws: LocalAws = request.getfixturevalue("local_aws")  # only when there is work
    outputs = tmp_path / "outputs.json"
    local_aws.write_outputs(outputs)
    env = {
        **os.environ,
        **local_aws.environment,
        **local_aws.outputs,
        "SAGA_LOCAL_OUTPUTS": str(outputs),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for command in runnable:
        completed = run_in_project(["bash", "-c", command.text], env, timeout=180)
        assert completed.returncode == command.expected_exit, (
            f"README.md:{command.line}: `{command.text}` exited {completed.returncode} "
            f"(expected {command.expected_exit}):\n{completed.stdout[-2000:]}\n"
            f"{completed.stderr[-2000:]}"
        )
