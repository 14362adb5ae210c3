"""`make venv` on a fresh clone says what it installs, stage by stage, before each quiet
install runs: pip and npm are stand-ins here (what they would install is not the point), the
Makefile and stacks/lambda_python.py are the real ones, run by the real make."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from sagactl.paths import PROJECT_ROOT

# A stand-in Python: the version probe, `-m venv` (a venv holding a copy of itself), and any
# other module (pip, stacks.lambda_python --check) said and done.
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = "-c" ]; then echo 3.12.1; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
if [ "$1" = "-m" ]; then echo "(ran python $*)"; exit 0; fi
exit 2
"""
FAKE_TOOL = """#!/bin/bash
echo "(ran $(basename "$0") $*)"
"""
FAKE_NPM = """#!/bin/bash
echo "(ran npm $*)"; mkdir -p node_modules
"""
CLONE_FILES = (
    "Makefile",
    "requirements.txt",
    "requirements-dev.txt",
    "lambdas/requirements.txt",
    "pyproject.toml",
    "package.json",
    "package-lock.json",
    "stacks/__init__.py",
    "stacks/lambda_python.py",
)
STAGES = (
    ("venv 1/5: a virtual environment in .venv on ", "stacks.lambda_python --venv .venv"),
    ("venv 2/5: the newest pip (about ", "-m pip install --quiet --upgrade pip"),
    (
        "venv 3/5: the pinned Python packages of requirements-dev.txt: the CDK library, moto",
        "-m pip install --quiet -r requirements-dev.txt",
    ),
    ("venv 4/5: this project (sagactl), editable (about ", "-m pip install --quiet --no-deps -e ."),
    ("venv 5/5: npm ci: the pinned CDK CLI, ", "npm ci --no-audit"),
)


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_venv_says_each_stage_and_how_long_before_it_runs(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    for name in CLONE_FILES:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / name, clone / name)
    tools = tmp_path / "bin"
    python = _executable(tools / "python3.12", FAKE_PYTHON)
    _executable(tools / "npm", FAKE_NPM)
    _executable(tools / "node", FAKE_TOOL)
    real_python3 = shutil.which("python3")
    assert real_python3 is not None
    os.symlink(real_python3, tools / "python3")  # runs the real stacks/lambda_python.py

    made = subprocess.run(
        ["make", "venv", f"PYTHON={python}"],
        cwd=clone,
        env={"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert made.returncode == 0, made.stdout + made.stderr
    lines = made.stdout.splitlines()
    position = -1
    for said, command in STAGES:
        announced = next(n for n, line in enumerate(lines) if line.startswith(said))
        ran = next(n for n, line in enumerate(lines) if command in line)
        assert position < announced < ran, (said, made.stdout)
        assert re.search(r"\((about \d+ s|\d+ to \d+ min on a first install)", lines[announced])
        position = ran
    # The README shows these lines as make prints them (the interpreter's path aside).
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    shown = [line for line in readme if re.match(r"venv \d/5: ", line)]
    assert len(shown) == 3
    for line in shown:
        assert line.replace("/usr/bin/python3.12", str(python)) in lines, line
    # Once installed, nothing is said again.
    again = subprocess.run(
        ["make", "venv", f"PYTHON={python}"],
        cwd=clone,
        env={"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0 and "venv 1/5" not in again.stdout, again.stdout
