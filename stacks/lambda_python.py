"""The functions' Python version, and where to find an interpreter of it.

Lambda runs the saga on python3.12 (stacks/layer_bundling.py's LAMBDA_RUNTIME). The venv, and
so `make test`, CI's `.ci/run` and the bytecode `cdk synth` puts in the assets
(stacks/bytecode.py), use an interpreter of that version where one is installed: the first of
`python3.12` on the PATH that runs (a pyenv shim of a version nobody selected does not: it
exits "command not found") and the newest 3.12.x pyenv installed. Without one, python3, with a
warning: the suite then runs on another Python than the functions do.

Run from the repository root with any python3 (the Makefile does, before any venv exists):

    python3 -m stacks.lambda_python                   # the interpreter's path, or "python3"
    python3 -m stacks.lambda_python --venv .venv [--python P]
                                                      # make .venv with it (again, if .venv runs
                                                      # another Python version)
    .venv/bin/python -m stacks.lambda_python --check  # warn if this is not the functions' Python

No third-party import: it runs before the venv has anything in it.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

LAMBDA_PYTHON_VERSION = "3.12"
FALLBACK = "python3"
_VERSION_PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


def candidates() -> list[str]:
    """Where an interpreter of the functions' version may be, in the order tried."""
    name = f"python{LAMBDA_PYTHON_VERSION}"
    on_path = shutil.which(name)
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    installed = sorted(
        pyenv.glob(f"{LAMBDA_PYTHON_VERSION}.*/bin/{name}"),
        key=lambda p: _release_key(p.parents[1].name),
        reverse=True,
    )
    return ([on_path] if on_path else []) + [str(p) for p in installed]


def _release_key(release: str) -> tuple[int, ...]:
    """3.12.10 after 3.12.9 (a string sort would put it first); anything else last."""
    parts = release.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else (-1,)


def version_of(interpreter: str) -> str | None:
    """The full version (e.g. 3.12.1) of an interpreter that runs, else None."""
    try:
        done = subprocess.run(
            [interpreter, "-c", _VERSION_PROBE],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def is_lambda_version(version: str | None) -> bool:
    return version is not None and version.rsplit(".", 1)[0] == LAMBDA_PYTHON_VERSION


@functools.cache
def lambda_python() -> tuple[str, str] | None:
    """(interpreter, full version) of the functions' Python here, or None."""
    for candidate in candidates():
        version = version_of(candidate)
        if is_lambda_version(version):
            assert version is not None
            return candidate, version
    return None


def this_python_version() -> str:
    major, minor, micro = sys.version_info[:3]
    return f"{major}.{minor}.{micro}"


def fallback_warning(running: str) -> str:
    return (
        f"warning: Python {running}, not the functions' Python {LAMBDA_PYTHON_VERSION}: the "
        "suite runs on another Python than Lambda does, and the Lambda assets carry no "
        f"bytecode. Install Python {LAMBDA_PYTHON_VERSION} (for example `pyenv install "
        f"{LAMBDA_PYTHON_VERSION}`) and run `make venv` again."
    )


def ensure_venv(venv: Path, python: str) -> str:
    """Make `venv` with `python`, again if it runs another minor version; what was done."""
    wanted = version_of(python)
    if wanted is None:
        raise SystemExit(f"error: {python} does not run: choose another with PYTHON=...")
    existing = version_of(str(venv / "bin" / "python")) if venv.exists() else None
    if existing is not None and existing.rsplit(".", 1)[0] == wanted.rsplit(".", 1)[0]:
        return f"{venv} runs Python {existing}"
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    before = f" (it ran Python {existing})" if existing else ""
    return f"made {venv} with Python {wanted} ({python}){before}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m stacks.lambda_python")
    parser.add_argument("--venv", type=Path, help="make this venv with the interpreter")
    parser.add_argument("--python", help="the interpreter to use (default: the one found)")
    parser.add_argument(
        "--check", action="store_true", help="warn if this Python is not the functions'"
    )
    args = parser.parse_args(argv)
    if args.check:
        if not is_lambda_version(this_python_version()):
            print(fallback_warning(this_python_version()), file=sys.stderr)
        return 0
    found = lambda_python()
    python = args.python or (found[0] if found else FALLBACK)
    if args.venv is not None:
        print(ensure_venv(args.venv, python))
    else:
        print(python)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
