"""Which Python the venv, the suite and the assets' bytecode use (stacks/lambda_python.py): the
functions' 3.12 where it is installed, found past a pyenv shim that does not run, else python3
with a warning; a venv of another version is made again."""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stacks.bytecode
import stacks.lambda_python
from stacks.lambda_python import ensure_venv, lambda_python, main

# A stand-in interpreter: answers the version probe and makes a "venv" holding a copy of itself.
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = "-c" ]; then echo {version}; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
exit 2
"""
# What a pyenv shim does when no selected version has the command.
SHIM = """#!/bin/bash
echo "pyenv: python3.12: command not found" >&2
exit 127
"""


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _fake_python(path: Path, version: str) -> Path:
    return _script(path, FAKE_PYTHON.format(version=version))


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty PATH and pyenv root: each test installs what it needs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    lambda_python.cache_clear()
    stacks.bytecode._interpreter.cache_clear()
    yield tmp_path
    lambda_python.cache_clear()
    stacks.bytecode._interpreter.cache_clear()


def test_pyenvs_newest_312_is_found_past_a_shim_that_does_not_run(machine: Path) -> None:
    _script(machine / "bin" / "python3.12", SHIM)
    versions = machine / "pyenv" / "versions"
    for release in ("3.12.9", "3.12.10", "3.11.7"):
        _fake_python(versions / release / "bin" / "python3.12", release)

    assert lambda_python() == (str(versions / "3.12.10" / "bin" / "python3.12"), "3.12.10")


def test_a_python312_on_the_path_that_runs_comes_first(machine: Path) -> None:
    on_path = _fake_python(machine / "bin" / "python3.12", "3.12.4")
    _fake_python(machine / "pyenv" / "versions" / "3.12.10" / "bin" / "python3.12", "3.12.10")

    assert lambda_python() == (str(on_path), "3.12.4")


def test_without_312_make_falls_back_to_python3_and_the_venv_warns(
    machine: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(machine / "bin" / "python3.12", SHIM)
    assert lambda_python() is None
    assert main([]) == 0
    assert capsys.readouterr().out == "python3\n"

    monkeypatch.setattr(stacks.lambda_python, "this_python_version", lambda: "3.11.7")
    assert main(["--check"]) == 0
    warning = capsys.readouterr().err
    assert "Python 3.11.7, not the functions' Python 3.12" in warning
    assert "make venv" in warning

    monkeypatch.setattr(stacks.lambda_python, "this_python_version", lambda: "3.12.1")
    assert main(["--check"]) == 0
    assert capsys.readouterr().err == ""


def test_a_venv_of_another_version_is_made_again_and_one_of_this_version_kept(
    machine: Path,
) -> None:
    python312 = _fake_python(machine / "bin" / "python3.12", "3.12.1")
    venv = machine / "venv"
    _fake_python(venv / "bin" / "python", "3.11.7")
    (venv / "installed-for-311").touch()

    said = ensure_venv(venv, str(python312))

    assert said == f"made {venv} with Python 3.12.1 ({python312}) (it ran Python 3.11.7)"
    assert not (venv / "installed-for-311").exists()
    (venv / "installed-for-312").touch()
    assert ensure_venv(venv, str(python312)) == f"{venv} runs Python 3.12.1"
    assert (venv / "installed-for-312").exists()


def test_the_assets_bytecode_comes_from_the_suites_own_312(
    machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The venv `make venv` made with 3.12 compiles the bytecode: one interpreter for the suite,
    CI and the synth. An explicit SAGA_BYTECODE_PYTHON of another version compiles nothing."""
    _fake_python(machine / "pyenv" / "versions" / "3.12.10" / "bin" / "python3.12", "3.12.10")
    monkeypatch.setattr(stacks.bytecode, "this_python_version", lambda: "3.12.1")
    assert stacks.bytecode._interpreter() == (sys.executable, "3.12.1")

    stacks.bytecode._interpreter.cache_clear()
    monkeypatch.setattr(stacks.bytecode, "this_python_version", lambda: "3.11.7")
    assert stacks.bytecode._interpreter() == (
        str(machine / "pyenv" / "versions" / "3.12.10" / "bin" / "python3.12"),
        "3.12.10",
    )

    stacks.bytecode._interpreter.cache_clear()
    monkeypatch.setenv("SAGA_BYTECODE_PYTHON", str(_fake_python(machine / "py311", "3.11.7")))
    assert stacks.bytecode._interpreter() is None
