"""Cold starts with the code laid out as Lambda mounts it, without and with shipped bytecode.

    python -m saga_bench.deployed [--runs N]

The cold-start benchmark (coldstart.py) imports the handlers from this checkout and the
dependencies from the virtualenv, whose bytecode Python wrote on first use. On Lambda the code
directories are read-only: the function's code in /var/task and the layer's packages in
/opt/python are compiled from source on every cold start unless the assets carry bytecode
(stacks/bytecode.py), while the runtime's own modules (the standard library, and the boto3 a
bare handler uses) have theirs. This benchmark builds that layout in a temporary directory,
from this machine's interpreter and packages (the assets' 3.12 arm64 build cannot run here):

- task/: `lambdas/` as the function asset holds it; opt/: every package the layer holds
  (the top-level names in the synthesized layer), from the virtualenv;
- "no bytecode": both without bytecode, nothing written (PYTHONDONTWRITEBYTECODE), as the
  assets were before they carried it;
- "bytecode": both compiled as the assets are (the code checked-hash, the layer
  unchecked-hash), by this interpreter.

The bare handler is the same in both: boto3 from the virtualenv, with its bytecode, as a bare
handler uses the runtime's. Durations are reported, never asserted.
"""

from __future__ import annotations

import argparse
import compileall
import os
import py_compile
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from saga_bench.coldstart import CodeDirs, format_cold_starts, measure_cold_starts
from sagactl.paths import PROJECT_ROOT
from stacks.function_code import LAMBDAS_DIR, asset_files
from stacks.layer_bundling import build_cached_layer

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


def layer_packages() -> list[str]:
    """The top-level modules and packages of the layer the stack deploys."""
    layer = build_cached_layer(LAMBDAS_DIR / "requirements.txt", PROJECT_ROOT / ".build")
    names = {
        p.name.removesuffix(".py")
        for p in (layer / "python").iterdir()
        if not p.name.endswith((".dist-info", ".pth")) and p.name not in ("bin", "__pycache__")
    }
    return sorted(names)


def _link_tree(source: Path, target: Path, files: Iterator[Path] | list[Path]) -> None:
    """Real directories, each file a link to the original: Python looks for bytecode beside the
    path it imports, so none of the originals' bytecode is found."""
    for path in files:
        link = target / path.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(path, link)


def _package_files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


@contextmanager
def deployed_layout(*, bytecode: bool) -> Iterator[CodeDirs]:
    with tempfile.TemporaryDirectory(prefix="bench-deployed-") as tmp:
        code = CodeDirs(task=Path(tmp) / "task", opt=Path(tmp) / "opt")
        _link_tree(LAMBDAS_DIR, code.task, asset_files(LAMBDAS_DIR))
        for name in layer_packages():
            found = [p for p in (SITE_PACKAGES / name, SITE_PACKAGES / f"{name}.py") if p.exists()]
            for root in found:
                _link_tree(SITE_PACKAGES, code.opt, _package_files(root))
        if bytecode:
            modes = py_compile.PycInvalidationMode
            for directory, mode in (
                (code.task, modes.CHECKED_HASH),
                (code.opt, modes.UNCHECKED_HASH),
            ):
                compileall.compile_dir(directory, quiet=1, workers=0, invalidation_mode=mode)
        yield code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m saga_bench.deployed", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=5, help="rounds (fresh interpreters each)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    for bytecode in (False, True):
        with deployed_layout(bytecode=bytecode) as code:
            results = measure_cold_starts(args.runs, code=code)
        print("bytecode shipped" if bytecode else "no bytecode (the assets before)")
        print(format_cold_starts(results, args.runs))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
