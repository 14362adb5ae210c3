"""`pip install .` gives an operator sagactl without the lab (issue 42): in a fresh virtual
environment, with no extra and offline (`pip install --no-index --find-links` a wheelhouse of
the dev venv's own distributions), `sagactl status --help`, `start` and `escalations` work
against a local AWS started from the dev install, and `sagactl local` says which extra it needs.

Slow (a venv, a wheel build and an install: about a minute on a busy machine), so it runs with
`make test-long`; tests/cli/test_operator_imports.py holds the import boundary in `make test`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, sys_tags

from local_aws.environment import LocalAws
from sagactl.errors import EXIT_ESCALATED
from sagactl.paths import LAB_PACKAGES, PROJECT_ROOT
from tests.cli.sagactl_helpers import example, saga
from tests.distributions import PROJECT, closure, declared

__all__ = ["saga"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("SAGA_LONG_TESTS") != "1", reason="slow: make test-long (SAGA_LONG_TESTS=1)"
    ),
]

# What a checkout holds that `pip install .` builds from (setuptools finds the packages).
SOURCES = ("pyproject.toml", "sagactl", "stacks", "lambdas/saga", *LAB_PACKAGES)
# The dev venv's files that are not part of a distribution as built.
NOT_BUILT = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
THIS_PYTHON = set(sys_tags())


def repack(distribution: importlib.metadata.Distribution, wheelhouse: Path) -> Path:
    """The installed `distribution` as the wheel it was installed from (its files, by its
    RECORD, and its WHEEL's first tag): a wheelhouse without a network."""
    root = Path(str(distribution.locate_file("")))
    files = [f for f in distribution.files or [] if ".." not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    wheel_file = (root / info / "WHEEL").read_text(encoding="utf-8")
    tags = re.findall(r"^Tag: (\S+)$", wheel_file, re.M)
    tag = next(tag for tag in tags if Tag(*tag.split("-")) in THIS_PYTHON)
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"])
    path = wheelhouse / f"{name}-{distribution.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in files:
            source = root / file
            if "__pycache__" in file.parts or not source.is_file():
                continue
            if file.parts[0] == info and file.name in NOT_BUILT:
                continue
            data = source.read_bytes()
            wheel.writestr(file.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{file.as_posix()},sha256={digest.decode()},{len(data)}")
        wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) that the build reads."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z", *SOURCES],
        cwd=PROJECT_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (PROJECT_ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, target / name)
    return target


def outside_the_checkout() -> dict[str, str]:
    """This environment (the local AWS's endpoint, fake credentials) without what would make
    Python import the checkout or pip look anywhere but the wheelhouse."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name != "PYTHONPATH" and not name.startswith("PIP_")
    }
    return {**environment, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@dataclass(frozen=True)
class Installed:
    venv: Path
    installed: str  # pip's output

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`args[0]` from the venv's bin/, outside the checkout and its PYTHONPATH."""
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=self.venv.parent,
            env=outside_the_checkout(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv where `pip install .` ran offline, with no extra."""
    where = tmp_path_factory.mktemp("operator-install")
    build = [Requirement(text) for text in PROJECT["build-system"]["requires"]]
    wheelhouse = where / "wheelhouse"
    wheelhouse.mkdir()
    for distribution in closure([*declared(), *build]).values():
        repack(distribution, wheelhouse)
    source = checkout_copy(where / "checkout")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [
            *(str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index"),
            *("--find-links", str(wheelhouse), str(source)),
        ],
        cwd=where,
        env=outside_the_checkout(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return Installed(venv, pip.stdout)


IMPORT_EVERY_OPERATOR_MODULE = """
import importlib, importlib.util, json, pkgutil, sagactl
from sagactl.commands import COMMANDS
needs_an_extra = {c.module for c in COMMANDS.values() if c.extra == "local"}
needs_an_extra |= {"sagactl.commands.demo", "sagactl.commands.local_common"}
imported = []
for module in pkgutil.walk_packages(sagactl.__path__, "sagactl."):
    if module.name not in needs_an_extra:
        importlib.import_module(module.name)
        imported.append(module.name)
print(json.dumps({
    "sagactl": sagactl.__file__,
    "imported": imported,
    "absent": [n for n in ("moto", "mcp", "aws_cdk") if importlib.util.find_spec(n) is None],
}))
"""


def test_the_operators_install_has_sagactl_and_none_of_the_lab(installed: Installed) -> None:
    assert "moto" not in installed.installed
    done = installed.run("python", "-c", IMPORT_EVERY_OPERATOR_MODULE)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert Path(answer["sagactl"]).is_relative_to(installed.venv)  # not the checkout's
    assert "sagactl.commands.escalations" in answer["imported"]
    assert answer["absent"] == ["moto", "mcp", "aws_cdk"]

    helped = installed.run("sagactl", "status", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: sagactl status")

    local = installed.run("sagactl", "local", "up")
    assert local.returncode == 1
    missing = re.fullmatch(
        r"sagactl: sagactl local needs the module '(\w+)', which comes with the \[local\] extra: "
        r"`pip install '\.\[local\]'` in a checkout of the repository \(`make venv` installs "
        r"everything\)\n",
        local.stderr,
    )
    assert missing is not None, local.stderr
    assert missing[1] in ("jsonata", "moto", "werkzeug")  # the local AWS's first import


def test_the_installed_sagactl_starts_cases_and_lists_escalations(
    installed: Installed, saga: LocalAws
) -> None:
    """Against a local AWS of the dev install (the `saga` fixture: the environment names its
    endpoint, fake credentials and the outputs)."""
    happy = installed.run("sagactl", "start", str(example("happy-path")), "--local", "--watch")
    assert happy.returncode == 0, happy.stderr
    assert "COMPLETED" in happy.stdout
    rejected = example("shipment-rejected")
    escalated = installed.run("sagactl", "start", str(rejected), "--local", "--watch")
    assert escalated.returncode == EXIT_ESCALATED, escalated.stderr

    listed = installed.run("sagactl", "escalations", "--local", "--json")
    assert listed.returncode == 0, listed.stderr
    escalations = json.loads(listed.stdout)["escalations"]
    assert [(e["case_id"], e["outcome"], e["reason"]) for e in escalations] == [
        ("case-shipment-rejected", "ESCALATED", "SHIPMENT_REJECTED")
    ]
