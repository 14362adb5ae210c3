"""Bytecode for the Lambda assets, compiled at synth by the functions' Python version.

Lambda's code directories (/var/task, /opt) are read-only: a module without bytecode beside it
is compiled from source on every cold start and the result thrown away. For this package's
dependencies (pydantic, Powertools, and the pinned boto3 that shadows the runtime's) and the
saga package that makes a cold start about 4x a bare boto3 handler's instead of about 1.3x
(`python -m saga_bench.deployed`, its two tables). So both assets carry
`__pycache__/*.cpython-312.pyc`, compiled by a Python 3.12 interpreter (bytecode is specific to
the minor version, not to the machine) as hash-based pycs (a zipped asset keeps no modification
times to compare with):

- the function code's are `checked-hash`: the runtime uses one when the hash of the source
  beside it matches, so a file edited after the synth (a hotfix in the Lambda console, which
  can edit a package this small) runs as edited, never as stale bytecode;
- the layer's are `unchecked-hash`: a published layer version cannot be edited, it is only ever
  built here, and checking would read and hash every module of pydantic, Powertools and
  botocore at each cold start (about 10 ms, `python -m saga_bench.deployed`).

The interpreter is `$SAGA_BYTECODE_PYTHON`, else the one running the synth when it is 3.12 (the
venv `make venv` made with it: the suite, CI and the synth share one interpreter), else the
first 3.12 stacks/lambda_python.py finds (`python3.12` on the PATH, pyenv's). Without one the
assets carry no bytecode (slower cold starts, same behaviour) and `cdk synth` says so; the
asset hashes say which it is, so the two never share a hash.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from aws_cdk import Annotations
from constructs import IConstruct

from stacks.lambda_python import (
    LAMBDA_PYTHON_VERSION,
    is_lambda_version,
    lambda_python,
    this_python_version,
    version_of,
)

ENVIRONMENT_VARIABLE = "SAGA_BYTECODE_PYTHON"
CHECKED = "checked-hash"
UNCHECKED = "unchecked-hash"
# Raise it when compile_tree changes what it writes: the asset hashes must change with it.
RECIPE = 1


class BytecodeError(RuntimeError):
    """The bytecode interpreter failed to compile an asset (the message carries its output)."""


def bytecode_python() -> str | None:
    """An interpreter of the functions' Python version, or None if there is none."""
    found = _interpreter()
    return None if found is None else found[0]


@functools.cache
def _interpreter() -> tuple[str, str] | None:
    """The interpreter and its full version (e.g. 3.12.1)."""
    explicit = os.environ.get(ENVIRONMENT_VARIABLE)
    if explicit:
        # Only that one: another version would write bytecode the runtime ignores.
        version = version_of(explicit)
        return (explicit, version) if is_lambda_version(version) and version else None
    if is_lambda_version(this_python_version()):
        return sys.executable, this_python_version()
    return lambda_python()


def bytecode_tag(mode: str) -> str:
    """Part of an asset's hash and cache key: whether it carries bytecode, which compiler
    wrote it and how (`mode`: CHECKED or UNCHECKED), so that a change to any is a new asset."""
    if bytecode_python() is None:
        return "no-pyc"
    found = _interpreter()
    version = found[1] if found is not None else "?"
    return f"pyc-{version}-{mode}-r{RECIPE}"


def compile_tree(directory: Path, runtime_path: str, mode: str) -> bool:
    """Write checked-hash bytecode beside every module under `directory`, its tracebacks
    naming the module where Lambda mounts it (`runtime_path`, e.g. /var/task). False if there
    is no interpreter to do it."""
    python = bytecode_python()
    if python is None:
        return False
    completed = subprocess.run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            mode,
            "-s",
            str(directory),
            "-p",
            runtime_path,
            str(directory),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if completed.returncode != 0:
        raise BytecodeError(
            f"{python} could not compile {directory} (exit {completed.returncode}):\n"
            f"{(completed.stdout + completed.stderr).strip()[-4000:]}"
        )
    return True


NO_BYTECODE = (
    f"No Python {LAMBDA_PYTHON_VERSION} interpreter found (set {ENVIRONMENT_VARIABLE} or put "
    f"python{LAMBDA_PYTHON_VERSION} on the PATH): the Lambda assets carry no bytecode, and every "
    "cold start compiles the saga package and its dependencies from source (about 4x a bare "
    "boto3 handler's cold start instead of about 1.3x: python -m saga_bench.deployed)."
)


def warn_without_bytecode(scope: IConstruct) -> None:
    """Say at synth (a CDK warning on `scope`) that the assets will carry no bytecode."""
    if bytecode_python() is None:
        Annotations.of(scope).add_warning_v2("saga:no-bytecode", NO_BYTECODE)


__all__ = [
    "LAMBDA_PYTHON_VERSION",
    "BytecodeError",
    "bytecode_python",
    "bytecode_tag",
    "compile_tree",
    "warn_without_bytecode",
]
