"""The README's commands still match the tool, and the local ones still do what it shows.

Marker (agreed with the README author):
- A fenced block whose info string is `console` holds commands as `$ ` lines (a trailing `\\`
  continues a line); the lines after a command, up to the next one, are its sample output.
- Every `$ sagactl ...` command in such a block must parse with sagactl's own parser: an unknown
  command or flag fails this test (README drift).
- Blocks whose info string is `console local` are also RUN, in README order, against a fresh
  local AWS (the real stack, its scheduled sweeper on), and those whose info string is
  `console local-stripe` against a fresh one of `sagactl local up --payments stripe` (the app
  synthesized with payments=stripe, its local Stripe server): `$ sagactl ...` and `$ aws ...`
  commands, with AWS_ENDPOINT_URL, fake credentials and SAGA_LOCAL_OUTPUTS set, each stack
  output exported under its own name (`$StateMachineArn`, `$LedgerTableName`, ...), cwd = the
  project root. Each must exit 0, unless the line ends with `# exit N`, and print what the
  README shows under it, compared as tests/cli/readme_output.py says (`...` lines and inline
  `...`, varying values by their shape). `sagactl local advance|clock` run against that local
  AWS; the other `sagactl local ...` commands are only parsed (the test brings its own).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_aws.emulator import LOCAL_ACCOUNT_ID
from local_aws.environment import LocalAws
from local_aws.schedules import RuleScheduler
from sagactl.cli import build_parser
from sagactl.paths import PROJECT_ROOT
from tests.cli.readme_output import compare, explain

README = PROJECT_ROOT / "README.md"
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
_EXPECTED_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
# What the README shows as the local AWS's endpoint (`sagactl local up`'s default port).
README_ENDPOINT = "http://127.0.0.1:4566"
# `sagactl local ...` commands that talk to a running local AWS, as the test's is.
RUNNABLE_LOCAL = ("sagactl local advance", "sagactl local clock")


@dataclass(frozen=True)
class Command:
    text: str  # the shell text, without the `$ ` prompt and the `# exit N` note
    run: bool  # from a `console local` block
    expected_exit: int
    line: int
    output: tuple[str, ...] = ()  # the sample output shown under it


def _block_commands(body: str, run: bool, first_line: int) -> list[Command]:
    commands: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(body.splitlines()):
        if not pending and not raw.startswith("$ "):
            if commands:  # sample output of the command above
                last = commands[-1]
                commands[-1] = Command(
                    last.text, last.run, last.expected_exit, last.line, (*last.output, raw)
                )
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
    return commands


def readme_commands(text: str, marker: str = "local") -> list[Command]:
    """The `console` blocks' commands; those of blocks marked `marker` are to be run."""
    commands: list[Command] = []
    for block in _FENCE.finditer(text):
        info = block.group("info").strip().split()
        if not info or info[0] != "console":
            continue
        first_line = text[: block.start("body")].count("\n") + 1
        commands += _block_commands(block.group("body"), marker in info[1:], first_line)
    return [c for c in commands if c.text.split()[0] in ("sagactl", "aws")]


def _documented_commands(marker: str = "local") -> list[Command]:
    """The README's commands; a README without any would silently test nothing, so it fails."""
    commands = readme_commands(README.read_text(encoding="utf-8"), marker)
    assert any(c.text.startswith("sagactl") for c in commands), (
        "README.md has no ```console blocks with `$ sagactl ...` lines "
        "(see this module's docstring for the marker)"
    )
    return commands


def test_marker_parsing() -> None:
    text = (
        "```console\n$ sagactl status case-1 \\\n    --json\n{ output }\n```\n"
        "```console local\n$ sagactl redrive case-1 --yes   # exit 3\nrefused\n...\n$ ls\n```\n"
        "```bash\n$ sagactl not-parsed\n```\n"
    )
    assert readme_commands(text) == [
        Command("sagactl status case-1 --json", False, 0, 2, ("{ output }",)),
        Command("sagactl redrive case-1 --yes", True, 3, 7, ("refused", "...")),
    ]


def test_output_comparison() -> None:
    """The convention of tests/cli/readme_output.py, on made-up output."""
    shown = [
        "watching case-1",
        "...",
        "  19:17:09.830     ok refunded ... (re_9e05cc33b3794e8e9727a48d52d234a9)",
        "outcome: COMPLETED",
    ]
    printed = [
        "watching case-1",
        "  10:00:00.000  execution started",
        "  10:00:01.250     ok refunded 20.00 USD (re_0123456789abcdef0123456789abcdef)",
        "outcome: COMPLETED",
    ]
    assert compare(shown, printed) is None
    assert compare(shown, [*printed[:1], *printed[2:]]) is None  # `...` may be no line
    drifted = compare(shown, [*printed[:-1], "outcome: ESCALATED"])
    assert drifted is not None and drifted.expected == "outcome: COMPLETED"
    assert compare(["started"], ["started", "and more"]) is not None  # nothing unshown
    assert compare([], ["anything"]) is not None  # no lines shown: prints nothing


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


def _runnable(command: Command) -> bool:
    if not command.run:
        return False
    return not command.text.startswith("sagactl local") or command.text.startswith(RUNNABLE_LOCAL)


def test_documented_local_commands_run_and_print_what_the_readme_shows(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    runnable = [c for c in _documented_commands() if _runnable(c)]
    assert runnable, "README.md has no ```console local blocks to run"
    local_aws: LocalAws = request.getfixturevalue("local_aws")  # only when there is work
    _run_against(local_aws, runnable, tmp_path)


def test_documented_local_stripe_commands_run_and_print_what_the_readme_shows(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The `console local-stripe` blocks, against the stack of `sagactl local up --payments
    stripe` and its local Stripe server."""
    runnable = [c for c in _documented_commands("local-stripe") if _runnable(c)]
    assert runnable, "README.md has no ```console local-stripe blocks to run"
    stripe_aws = request.getfixturevalue("stripe_aws")
    _run_against(stripe_aws.local, runnable, tmp_path)


def _run_against(local_aws: LocalAws, runnable: list[Command], tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    local_aws.write_outputs(outputs)
    env = {
        **os.environ,
        **local_aws.environment,
        **local_aws.outputs,
        "SAGA_LOCAL_OUTPUTS": str(outputs),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",  # stdout and stderr in the order printed
        "USER": "ada",  # who `escalations resolve` records by default locally
        "LOGNAME": "ada",
    }
    # As `sagactl local up` runs it; its thread polls hourly, so only `local advance` (which
    # fires each rule whose period it passed) makes the sweeper run during the test.
    scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, local_aws.server.region, poll_seconds=3600)
    local_aws.server.start_schedules(scheduler)
    scheduler.tick()  # the rules' first period starts now
    try:
        for command in runnable:
            run_and_compare(command, env, local_aws.endpoint)
    finally:
        local_aws.server.stop_schedules()


def run_and_compare(
    command: Command, env: dict[str, str], endpoint: str, page: str = "README.md"
) -> None:
    """Run a documented command as a user's shell does; its exit code and its output (the local
    AWS's endpoint read as the page's) must be what `page` shows."""
    completed = subprocess.run(
        ["bash", "-c", command.text],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,
        check=False,
    )
    printed = completed.stdout.replace(endpoint, README_ENDPOINT).splitlines()
    where = f"{page}:{command.line}: `{command.text}`"
    assert completed.returncode == command.expected_exit, (
        f"{where} exited {completed.returncode} (expected {command.expected_exit}):\n"
        + "\n".join(printed[-40:])
    )
    mismatch = compare(list(command.output), printed)
    assert mismatch is None, f"{where}: {explain(mismatch, list(command.output), printed)}"
