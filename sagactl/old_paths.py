"""The import paths of the modules that left sagactl in 0.2.0 (issue 42), kept until 0.3.0.

sagactl is the operator's CLI; the instruments it is tested with moved beside it as packages of
their own (docs/architecture.md): `sagactl.local` is `local_aws`, `sagactl.campaign` is
`fault_campaign`, `sagactl.bench` (with `sagactl.metering` and `sagactl.deploy_cost`) is
`saga_bench`, `sagactl.iam` is `offline_iam`, `sagactl.trim_models` and `sagactl.validate_aws`
are `saga_build`'s. An old path still imports, as the new module itself (the same object, so a
monkeypatch through either path patches both), with a DeprecationWarning, and `python -m` runs
it (`python -m sagactl.campaign ...`).

Not as files at the old paths: a file there would hide the move from git's rename detection,
and an edit made on another branch to the old file would not follow it into the new one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import CodeType, ModuleType

REMOVED_IN = "0.3.0"
# An old package and each module under it; the longest old name that matches wins.
MOVED: dict[str, str] = {
    "sagactl.local": "local_aws",
    "sagactl.local.process": "sagactl.local_process",
    "sagactl.campaign": "fault_campaign",
    "sagactl.bench": "saga_bench",
    "sagactl.metering": "saga_bench.metering",
    "sagactl.deploy_cost": "saga_bench.deploy_cost",
    "sagactl.iam": "offline_iam",
    "sagactl.trim_models": "saga_build.trim_models",
    "sagactl.validate_aws": "saga_build.validate_aws",
}


def new_name(old: str) -> str | None:
    """Where the module `old` is now, or None if it did not move."""
    for prefix in sorted(MOVED, key=len, reverse=True):
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix) :]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new one."""

    def __init__(self, new: str, found: importlib.machinery.ModuleSpec) -> None:
        self.new = new
        self.found = found

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} is {self.new} now: the old path goes in sagactl {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        # The import system set the old name's spec on the module: it keeps its own.
        module.__spec__ = self.found

    def get_code(self, fullname: str) -> CodeType | None:
        """For `python -m <old name>` (runpy runs the code, it imports nothing)."""
        loader = self.found.loader
        get_code = getattr(loader, "get_code", None)
        return get_code(self.new) if get_code is not None else None

    def is_package(self, fullname: str) -> bool:
        return self.found.submodule_search_locations is not None


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        spec = importlib.machinery.ModuleSpec(
            fullname, _Alias(new, found), is_package=found.submodule_search_locations is not None
        )
        spec.submodule_search_locations = found.submodule_search_locations
        return spec


def install() -> None:
    """Serve the old paths, ahead of the path finder: an old directory left with only its
    __pycache__ would otherwise import as an empty namespace package."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
