"""What pyproject.toml declares, and which installed distributions that brings: the tests of the
declared dependencies (tests/unit/test_packaging.py) and of an operator's install
(tests/cli/test_operator_install.py) read them here."""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from sagactl.paths import PROJECT_ROOT

PROJECT: dict[str, Any] = tomllib.loads(
    (PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8")
)
NAME = canonicalize_name(PROJECT["project"]["name"])


def declared(*extras: str) -> list[Requirement]:
    """The requirements of `pip install '.[extras]'`: the dependencies, each extra's, and those
    of the extras an extra names (`replacement-order-saga[cdk]`), without those self-references."""
    optional: dict[str, list[str]] = PROJECT["project"]["optional-dependencies"]
    found: list[Requirement] = []
    seen: set[str] = set()
    todo = [Requirement(text) for text in PROJECT["project"]["dependencies"]]
    for extra in extras:
        todo += [Requirement(f"{NAME}[{extra}]")]
    while todo:
        requirement = todo.pop(0)
        if canonicalize_name(requirement.name) != NAME:
            found.append(requirement)
            continue
        for extra in sorted(requirement.extras - seen):
            seen.add(extra)
            todo += [Requirement(text) for text in optional[extra]]
    return found


def closure(requirements: Iterable[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions `requirements` bring, theirs and their extras' included, by
    canonical name."""
    found: dict[str, importlib.metadata.Distribution] = {}
    extras_done: dict[str, set[str]] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        extras = {"", *requirement.extras}
        if not extras - extras_done.get(name, set()):
            continue
        extras_done[name] = extras_done.get(name, set()) | extras
        found[name] = importlib.metadata.distribution(requirement.name)
        for text in found[name].requires or []:
            needed = Requirement(text)
            marker = needed.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras):
                todo.append(needed)
    return found


@functools.cache
def _packages_distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()  # reads every RECORD: once


def top_level_names(distributions: Iterable[str]) -> set[str]:
    """The importable top-level names of the distributions (canonical names)."""
    wanted = set(distributions)
    return {
        module
        for module, names in _packages_distributions().items()
        if any(canonicalize_name(name) in wanted for name in names)
    }
