"""The habits around the code run the same checks as `make test`: the pre-commit hooks, and
the CI workflow for forks."""

from __future__ import annotations

import re
from typing import Any

import yaml

from sagactl.paths import PROJECT_ROOT


def _make_recipe(target: str) -> list[str]:
    """The commands of a Makefile target, with `$(BIN)` as the venv's bin directory."""
    lines = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().replace("$(BIN)", ".venv/bin"))
    return recipe


def _load(relative: str) -> Any:
    return yaml.safe_load((PROJECT_ROOT / relative).read_text(encoding="utf-8"))


def test_the_pre_commit_hooks_run_the_commands_of_make_lint_and_typecheck() -> None:
    hooks = [hook for repo in _load(".pre-commit-config.yaml")["repos"] for hook in repo["hooks"]]
    assert [hook["entry"] for hook in hooks] == _make_recipe("lint") + _make_recipe("typecheck")
    # Whole-tree runs with the venv's pinned tools, never a copy pre-commit installs itself.
    assert {(hook["language"], hook["pass_filenames"]) for hook in hooks} == {
        ("unsupported", False)
    }


def test_the_ci_workflow_runs_the_ci_script_with_pinned_actions() -> None:
    steps = _load(".github/workflows/ci.yml")["jobs"]["test"]["steps"]
    assert steps[-1]["run"] == "bash .ci/run"
    actions = [step["uses"] for step in steps if "uses" in step]
    assert actions and all(re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", a) for a in actions)
    assert "make test" in (PROJECT_ROOT / ".ci" / "run").read_text(encoding="utf-8")
