"""pyproject.toml declares what each package of this distribution imports (issue 42): sagactl
what `pip install .` brings, each tool of the lab its extra, and requirements*.txt stay the
pinned lock, each pin inside the range pyproject.toml declares.

tests/cli/test_operator_install.py installs it for real (offline, in a fresh venv: `make
test-long`); these hold the same rules in `make test`, from the source and the dev venv."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from sagactl.paths import LAB_PACKAGES, OPERATOR_PACKAGES, PROJECT_ROOT
from tests.distributions import closure, declared, top_level_names

LOCKS = ("requirements.txt", "requirements-dev.txt", "lambdas/requirements.txt")
# sagactl's commands that need an extra (sagactl.commands.COMMANDS names it for the user).
NEEDS_MCP = ("sagactl/commands/mcp.py",)
NEEDS_LOCAL = (
    "sagactl/commands/local.py",
    "sagactl/commands/demo.py",
    "sagactl/commands/local_common.py",
)
# Each directory's modules and what installs what they import (lambdas/saga is the Lambda
# layer's: lambdas/requirements.txt, tests/infra/test_layer_contents.py).
EXTRA_OF = {
    "sagactl": (),
    "stacks": ("cdk",),
    "local_aws": ("local",),
    "fault_campaign": ("campaign",),
    "saga_bench": ("campaign",),
    "offline_iam": ("local",),
    "saga_build": ("build",),
}
FIRST_PARTY = {*OPERATOR_PACKAGES, *LAB_PACKAGES}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)$")


def pins(path: str) -> dict[str, str]:
    """{canonical name: version} of a lock file and the files it includes (`-r`)."""
    found: dict[str, str] = {}
    for raw in (PROJECT_ROOT / path).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found |= pins(str(Path(path).parent / line[3:].strip()))
        elif line:
            match = PIN.fullmatch(line)
            assert match is not None, f"{path}: not a pin: {line!r}"
            found[canonicalize_name(match[1])] = match[2]
    return found


def test_each_pin_is_inside_the_range_pyproject_declares() -> None:
    locked = {name: version for lock in LOCKS for name, version in pins(lock).items()}
    outside = {
        str(requirement): locked.get(canonicalize_name(requirement.name), "not pinned")
        for requirement in declared("dev")
        if locked.get(canonicalize_name(requirement.name), "not pinned")
        not in requirement.specifier
    }
    assert outside == {}


def test_each_package_the_venv_pins_is_declared() -> None:
    """requirements.txt and requirements-dev.txt name what the project itself needs (the
    Lambda layer's lock also lists what its packages require)."""
    named = {canonicalize_name(requirement.name) for requirement in declared("dev")}
    own = pins("requirements.txt") | {
        name: version
        for name, version in pins("requirements-dev.txt").items()
        if name not in pins("lambdas/requirements.txt")
    }
    assert sorted(set(own) - named) == []


def _imports(path: Path) -> set[str]:
    """The top-level names a module imports (at its top or in a function), except under
    `if TYPE_CHECKING:` (the type checker's alone)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return names


def _extras_of(module: str) -> tuple[str, ...]:
    if module in NEEDS_MCP:
        return ("mcp",)
    if module in NEEDS_LOCAL:
        return ("local",)
    return EXTRA_OF[module.partition("/")[0]]


def test_each_module_imports_only_what_its_install_brings() -> None:
    """An import of a distribution its extra does not bring (itself or through what it
    requires) is an ImportError on an install with that extra alone."""
    brought: dict[tuple[str, ...], set[str]] = {}
    unbrought: dict[str, list[str]] = {}
    modules = [path for package in EXTRA_OF for path in (PROJECT_ROOT / package).rglob("*.py")]
    assert len(modules) > 150
    for path in modules:
        module = str(path.relative_to(PROJECT_ROOT))
        extras = _extras_of(module)
        if extras not in brought:
            brought[extras] = top_level_names(closure(declared(*extras)))
        allowed = FIRST_PARTY | set(sys.stdlib_module_names) | brought[extras]
        if missing := sorted(_imports(path) - allowed):
            unbrought[module] = missing
    assert unbrought == {}


IMPORT_THE_OPERATORS_MODULES = """
import importlib, importlib.abc, json, pkgutil, sys
allowed = set(json.loads(sys.argv[1]))
skip = set(json.loads(sys.argv[2]))

class Undeclared(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.partition(".")[0]
        if top in allowed or top in sys.stdlib_module_names or top.startswith("_"):
            return None
        raise ModuleNotFoundError(f"No module named {name!r} (not declared)", name=name)

sys.meta_path.insert(0, Undeclared())
import sagactl
imported = []
for module in pkgutil.walk_packages(sagactl.__path__, "sagactl."):
    if module.name not in skip:
        importlib.import_module(module.name)
        imported.append(module.name)
print(json.dumps({"imported": imported, "moto": [m for m in sys.modules if m.startswith("moto")]}))
"""


def test_the_operators_modules_import_with_the_dependencies_alone() -> None:
    """Every sagactl module but the commands that need an extra imports when only what
    `pip install .` brings may be imported (in a fresh interpreter: this one has the lab)."""
    allowed = FIRST_PARTY | top_level_names(closure(declared()))
    skip = [m.removesuffix(".py").replace("/", ".") for m in (*NEEDS_MCP, *NEEDS_LOCAL)]
    arguments = [json.dumps(sorted(allowed)), json.dumps(skip)]
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_OPERATORS_MODULES, *arguments],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert {"sagactl.commands.status", "sagactl.commands.escalations", "sagactl.target"} <= set(
        answer["imported"]
    )
    assert answer["moto"] == []
