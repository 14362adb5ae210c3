"""The operator's CLI apart from the lab (issue 42, docs/architecture.md): `sagactl` imports the
module of the command asked for and no other, and the operator's code imports none of the
packages it is tested with (local_aws, fault_campaign, saga_bench, offline_iam, saga_build).

Checked in a fresh interpreter (this one has imported everything) and in the source."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from sagactl.cli import build_parser
from sagactl.commands import COMMANDS
from sagactl.paths import LAB_PACKAGES, PROJECT_ROOT

# What only an extra brings (pyproject.toml): an operator's install may lack it.
EXTRAS_ONLY = ("moto", "mcp", "aws_cdk", "jsonata", "werkzeug", "matplotlib")
# `sagactl local`'s own modules: they reach the local AWS, and load only for `sagactl local`.
LOCAL_COMMAND = (
    "sagactl/commands/local.py",
    "sagactl/commands/demo.py",
    "sagactl/commands/local_common.py",
)

STATUS_HELP = """
import contextlib, io, json, sys
from sagactl.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["status", "--help"])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "help": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def test_status_help_loads_neither_moto_nor_the_lab() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STATUS_HELP],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answer = json.loads(done.stdout)
    assert answer["code"] == 0
    assert answer["help"].startswith("usage: sagactl status")
    loaded = {name.partition(".")[0] for name in answer["modules"]}
    assert sorted(loaded & {*LAB_PACKAGES, *EXTRAS_ONLY}) == []
    assert [name for name in answer["modules"] if name.startswith("moto")] == []


def test_sagactl_help_lists_every_command_as_their_modules_do() -> None:
    """`sagactl --help` comes from COMMANDS alone: the same text as with every module loaded."""
    lazy = build_parser([]).format_help()
    assert lazy == build_parser().format_help()
    assert all(f"    {name}" in lazy for name in COMMANDS)


def _imported(path: str) -> set[str]:
    """The top-level packages a module imports, at its top or inside a function."""
    tree = ast.parse((PROJECT_ROOT / path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def test_the_operators_code_imports_no_lab_package() -> None:
    modules = sorted(
        str(path.relative_to(PROJECT_ROOT)) for path in (PROJECT_ROOT / "sagactl").rglob("*.py")
    )
    assert "sagactl/commands/status.py" in modules and set(LOCAL_COMMAND) <= set(modules)
    found = {
        module: sorted(_imported(module) & {*LAB_PACKAGES, "moto"})
        for module in modules
        if module not in LOCAL_COMMAND
    }
    assert {module: names for module, names in found.items() if names} == {}
