"""The modules that left sagactl in 0.2.0 (issue 42) still import by their old paths, until
0.3.0 (sagactl.old_paths; docs/architecture.md): each old path is the new module itself, and
the old `python -m` commands run the new ones."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import warnings

import pytest

from sagactl.paths import PROJECT_ROOT

# Where each moved package and module was before 0.2.0.
MOVED_PACKAGES = {
    "local_aws": "sagactl.local",
    "fault_campaign": "sagactl.campaign",
    "saga_bench": "sagactl.bench",
    "offline_iam": "sagactl.iam",
}
MOVED_MODULES = {
    "sagactl.local_process": "sagactl.local.process",
    "saga_bench.metering": "sagactl.metering",
    "saga_bench.deploy_cost": "sagactl.deploy_cost",
    "saga_build.trim_models": "sagactl.trim_models",
    "saga_build.validate_aws": "sagactl.validate_aws",
}


def _old_paths() -> dict[str, str]:
    """{old path: new module} for every module of the moved packages, and the moved modules."""
    paths = {old: new for new, old in MOVED_MODULES.items()}
    for new, old in MOVED_PACKAGES.items():
        paths[old] = new
        package = importlib.import_module(new)
        for module in pkgutil.walk_packages(package.__path__, f"{new}."):
            if not module.name.endswith(".__main__"):  # importing it runs it
                paths.setdefault(old + module.name[len(new) :], module.name)
    return paths


OLD_PATHS = _old_paths()


def test_every_old_path_is_the_new_module() -> None:
    assert {"sagactl.local.emulator", "sagactl.campaign.mutants", "sagactl.iam.evaluate"} <= set(
        OLD_PATHS
    )
    # every module of the four packages, their subpackages' too, not only their __init__
    files = [
        path
        for package in MOVED_PACKAGES
        for path in (PROJECT_ROOT / package).rglob("*.py")
        if path.name != "__main__.py"
    ]
    assert len(OLD_PATHS) == len(files) + len(MOVED_MODULES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in sorted(OLD_PATHS.items()):
            module = importlib.import_module(old)
            assert module is importlib.import_module(new), old
            assert module.__spec__ is not None and module.__spec__.name == new, old


def test_no_module_is_left_at_an_old_path() -> None:
    """A branch that added a module under an old directory (sagactl/local/stripe/, ...) merges
    it there: it belongs in the new package, where the old path's alias finds it."""
    old_files = [
        *(f"{old.replace('.', '/')}/" for old in MOVED_PACKAGES.values()),
        *(f"{old.replace('.', '/')}.py" for old in MOVED_MODULES.values()),
    ]
    listed = subprocess.run(
        ["git", "ls-files", "--", *old_files],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == []


def test_an_old_path_says_when_it_goes() -> None:
    code = "import warnings; warnings.simplefilter('error'); import sagactl.iam.evaluate"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "DeprecationWarning: sagactl.iam is offline_iam now: the old path goes in sagactl 0.3.0"
        in done.stderr
    )


@pytest.mark.parametrize(
    ("old", "usage"),
    [
        ("sagactl.campaign", "usage: python -m fault_campaign"),
        ("sagactl.bench", "usage: python -m saga_bench"),
        ("sagactl.validate_aws", "usage: make validate-aws"),
    ],
)
def test_the_old_module_commands_run_the_new_ones(old: str, usage: str) -> None:
    """The Makefile's `python -m` commands before 0.2.0."""
    done = subprocess.run(
        [sys.executable, "-m", old, "--help"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(usage)
