"""`make mutate`: each curated mutant in a scratch copy of the tree, never in the working tree.

The copy holds the repository's files (tracked and untracked, not ignored) with `.build` and
`node_modules` linked; `PYTHONPATH` puts the copy first, and the run checks that the copy's
modules are the ones imported. First the suite must pass on the copy as it is (else every
mutant would look killed). Per mutant: the suite (`pytest -x` over every test but the campaign
slice) and, on its own, the fixed-seed campaign slice of `make test` (`--fail-fast`) run
against it; the mutant is applied for each of its runs only (refused unless its old text occurs
exactly once) and its file restored after, so a baseline run in between sees no mutant. The
table has a column for each: the campaign is meant to be an independent oracle, so what the
slice alone kills is measured for every mutant. A mutant is killed when either fails; every one
must be. The slice kills only by a violation of a named invariant, which its cell names: a crash
or a timeout of the slice is no measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fault_campaign.mutants import MUTANTS, Mutant, MutantDoesNotApply, apply, by_name
from fault_campaign.orchestrate import load_results, shard_environment, slice_command
from sagactl.paths import LAB_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PYTEST = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
SUITE = [
    *PYTEST,
    # the fast directories first: a killed mutant stops at its first failure
    "tests/unit",
    "tests/integration",
    "tests/e2e",
    "tests/infra",
    "tests/campaign",
    "tests/cli",
    # the slice is the other column
    "--deselect",
    "tests/campaign/test_campaign_slice.py",
    # Timing: whether StopExecution lands before the retry's second call (a loaded machine
    # lets the retry win); it tests the local AWS's stop, no safety rule.
    "--deselect",
    "tests/e2e/test_local_redrive.py::test_an_aborted_execution_resumes_where_it_was_stopped",
]
SUITE_TIMEOUT_SECONDS = 1800
# What `make mutate` writes: the results (kept in the repository, so a run of a few mutants
# keeps every other row) and the table made from them.
OUTPUTS = ("docs/mutants.json", "docs/mutants.md")
CAMPAIGN_TIMEOUT_SECONDS = 1200


def scratch_copy(root: Path = ROOT) -> Path:
    """A copy of the repository's files in a new temporary directory."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    tree = Path(tempfile.mkdtemp(prefix="saga-mutate-")) / "tree"
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    # The virtualenv too: tests that run this checkout's console scripts find them in the copy.
    for linked in (".build", "node_modules", ".venv"):
        if (root / linked).exists():
            (tree / linked).symlink_to((root / linked).resolve())
    return tree


def python_of(tree: Path) -> str:
    """The interpreter the runs use: the copy's (linked) virtualenv, so that `sys.executable`
    and the console scripts next to it are the copy's; else this one."""
    linked = tree / ".venv" / "bin" / "python"
    return str(linked) if linked.exists() else sys.executable


def tree_digest(tree: Path) -> str:
    """What the results were measured against: every file of the copy (links excepted)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
        if any(part in (".build", "node_modules", ".venv", "__pycache__") for part in path.parts):
            continue
        if str(path.relative_to(tree)) in OUTPUTS:  # what a run writes measures nothing
            continue
        digest.update(str(path.relative_to(tree)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _load(out: str | None) -> list[dict[str, Any]]:
    if not out or not Path(out).is_file():
        return []
    loaded: list[dict[str, Any]] = json.loads(Path(out).read_text(encoding="utf-8"))
    return loaded


def _earlier(out: str | None, digest: str) -> dict[str, dict[str, Any]]:
    """Each mutant's parts measured over this same tree: a stopped `make mutate` resumes."""
    earlier = {}
    for result in _load(out):
        same = {part: result[part] for part in PARTS if _tree(result, part) == digest}
        if same:
            rest = {key: value for key, value in result.items() if key not in PARTS}
            earlier[result["name"]] = {**rest, **same}
    return earlier


def _tree(result: dict[str, Any], part: str) -> str | None:
    """The tree `part` of `result` was measured over (results from before parts named their own
    tree name it once, for both)."""
    measured = result.get(part)
    if measured is None:
        return None
    tree = measured.get("tree") if "commit" in measured else result.get("tree")
    return str(tree) if tree else None


def _merged(out: str | None, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's results, and for the mutants it did not run (`--only`) the latest earlier
    ones (each says at which commit it was measured), in the curated order."""
    latest = {r["name"]: r for r in _load(out)}
    latest.update({r["name"]: combined(latest.get(r["name"]), r) for r in results})
    return [latest[m.name] for m in MUTANTS if m.name in latest]


def _commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _save(out: str | None, results: list[dict[str, Any]]) -> None:
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


class BaselineFails(RuntimeError):
    """Tests fail on the copy without any mutant: every mutant would look killed."""


class Baseline:
    """What must pass on the copy before a mutant's run of it counts: the mutants' own tests
    before any mutant (cheap), the whole suite before the first mutant that needs it (once per
    tree: `--out` keeps a marker)."""

    def __init__(self, tree: Path, digest: str, out: str | None) -> None:
        self.tree, self.digest = tree, digest
        self.marker = ROOT / ".campaign" / "mutate.baseline" if out else None  # never tracked
        self.checked: set[tuple[str, ...]] = set()
        marker = self.marker
        if marker is not None and marker.is_file() and marker.read_text("utf-8") == digest:
            self.checked.add(())

    def require(self, tests: tuple[str, ...] = ()) -> None:
        """`tests` (the whole suite when empty) pass without a mutant, or BaselineFails."""
        if () in self.checked or tests in self.checked:
            return
        name = "the suite" if not tests else "the mutants' own tests"
        verb = ("fails", "passes") if not tests else ("fail", "pass")
        log = self.tree.parent / f"baseline.{'suite' if not tests else 'tests'}.log"
        command = [python_of(self.tree), *(SUITE if not tests else [*PYTEST, *tests])]
        code, seconds = _run(command, self.tree, SUITE_TIMEOUT_SECONDS, log)
        if code != 0:
            raise BaselineFails(f"{name} {verb[0]} without any mutant (see {log})")
        print(f"mutate: {name} {verb[1]} without a mutant ({round(seconds)} s)", flush=True)
        self.checked.add(tests)
        if not tests and self.marker is not None:
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.write_text(self.digest, encoding="utf-8")


def _environment(tree: Path) -> dict[str, str]:
    env = shard_environment(0.02)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "lambdas")])
    env["SAGA_LOCAL_TIME_SCALE"] = "0.05"
    return env


def check_imports(tree: Path) -> None:
    """The copy's modules, not the working tree's, are the ones the runs import."""
    packages = ("saga.ledger", "sagactl", *LAB_PACKAGES)
    code = f"import {', '.join(packages)}; " + "; ".join(f"print({p}.__file__)" for p in packages)
    out = subprocess.run(
        [python_of(tree), "-c", code],
        cwd=tree,
        env=_environment(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not all(Path(path).resolve().is_relative_to(tree.resolve()) for path in out):
        raise SystemExit(f"mutate: the scratch copy is not what is imported: {out}")


TIMED_OUT = -1


def _run(command: list[str], tree: Path, timeout: float, log: Path) -> tuple[int, float]:
    """(exit status, or TIMED_OUT; seconds)."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as sink:
        try:
            completed = subprocess.run(  # noqa: PLW1510 (the exit status is read below)
                command,
                cwd=tree,
                env=_environment(tree),
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
            code = completed.returncode
        except subprocess.TimeoutExpired:
            code = TIMED_OUT
            sink.write(f"\nmutate: timed out after {timeout}s\n")
    return code, time.monotonic() - started


# A case the harness could not run to its end: the slice saw something, but no invariant
# named it, so it is no kill.
NOT_AN_INVARIANT = "case_ran"


def first_violation(directory: Path) -> dict[str, Any] | None:
    """The slice's first violation of a named invariant in its shards' results (the lowest
    case; an account-wide check's after every case), or None."""
    found: list[tuple[float, dict[str, Any]]] = []
    for block in load_results(directory):
        for case in block["cases"]:
            found += [
                (case["index"], {"invariant": v["invariant"], "case": case["index"]})
                for v in case["violations"]
                if v["invariant"] != NOT_AN_INVARIANT
            ]
        found += [
            (float("inf"), {"invariant": v["invariant"], "block": block["block"]})
            for v in block["violations"]
        ]
    return min(found, key=lambda pair: pair[0])[1] if found else None


def slice_verdict(code: int, directory: Path, seconds: float) -> dict[str, Any]:
    """The slice kills a mutant only by reporting a violation of a named invariant (exit 3,
    the violation in its results, named in the cell). A crash, a timeout or a case that could
    not run is no kill and no survival: the cell says what happened instead."""
    verdict: dict[str, Any] = {"seconds": round(seconds)}
    if code == 0:
        return {"killed": False, **verdict}
    found = first_violation(directory) if code == 3 else None
    if found is not None:
        return {"killed": True, **found, **verdict}
    error = {TIMED_OUT: "timed out", 3: "only cases that could not run"}.get(code, f"exit {code}")
    return {"killed": False, "error": error, **verdict}


PARTS = ("suite", "campaign")


def parts_wanted(args: argparse.Namespace) -> tuple[str, ...]:
    """What this run measures: the suite, the slice, or both (the default)."""
    skip = {"suite": args.skip_suite, "campaign": args.skip_campaign}
    return tuple(part for part in PARTS if not skip[part])


def combined(earlier: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A mutant's parts from separate runs (`--skip-suite`, then `--skip-campaign`, or a later
    run of one part) as one result: each part keeps the tree and commit it was measured at."""
    if earlier is None:
        return new
    where = {key: earlier[key] for key in ("commit", "tree") if earlier.get(key)}
    kept = {
        # A part names its own commit and tree; one from before parts did was the row's.
        part: earlier[part] if "commit" in earlier[part] else {**where, **earlier[part]}
        for part in PARTS
        if part in earlier and part not in new
    }
    result = {**new, **kept}
    result["killed"] = any(result.get(part, {}).get("killed") for part in PARTS)
    return result


@contextmanager
def _applied(mutant: Mutant, tree: Path, original: str) -> Iterator[None]:
    """The copy with the mutant for one run, then as the repository has it again: a baseline
    run between two runs of the mutant must see no mutant (else a killed mutant looks like a
    suite that fails without one)."""
    path = tree / mutant.file
    path.write_text(original, encoding="utf-8")
    apply(mutant, tree)
    try:
        yield
    finally:
        path.write_text(original, encoding="utf-8")


def _suite(
    mutant: Mutant, tree: Path, logs: Path, baseline: Baseline, original: str
) -> dict[str, Any]:
    """The suite against the mutant (applied over `original`, its file's text): its own tests
    first (Mutant.tests), the whole suite only if they pass. Either failing is the suite
    failing: those tests are part of it, and `baseline` saw them pass without the mutant."""
    seconds = 0.0
    if mutant.tests:
        with _applied(mutant, tree, original):
            code, seconds = _run(
                [python_of(tree), *PYTEST, *mutant.tests],
                tree,
                SUITE_TIMEOUT_SECONDS,
                logs / f"{mutant.name}.tests.log",
            )
        if code != 0:
            return {
                "killed": True,
                "seconds": round(seconds),
                "by": "its tests",
                "tests": [Path(test).name.split("::")[0] for test in mutant.tests],
            }
    baseline.require()  # on the copy without the mutant
    with _applied(mutant, tree, original):
        code, more = _run(
            [python_of(tree), *SUITE],
            tree,
            SUITE_TIMEOUT_SECONDS,
            logs / f"{mutant.name}.suite.log",
        )
    return {"killed": code != 0, "seconds": round(seconds + more)}


def run_mutant(
    mutant: Mutant, tree: Path, args: argparse.Namespace, baseline: Baseline
) -> dict[str, Any]:
    original = (ROOT / mutant.file).read_text(encoding="utf-8")
    logs = tree.parent / "logs"
    logs.mkdir(exist_ok=True)
    result: dict[str, Any] = {
        "name": mutant.name,
        "rule": mutant.rule,
        "file": mutant.file,
        "outside_slice": mutant.outside_slice,
    }
    if not args.skip_suite:
        result["suite"] = _suite(mutant, tree, logs, baseline, original)
    if not args.skip_campaign:
        directory = tree.parent / f"campaign-{mutant.name}"
        shutil.rmtree(directory, ignore_errors=True)
        command = [python_of(tree), *slice_command(directory, fail_fast=True)]
        with _applied(mutant, tree, original):
            code, seconds = _run(
                command, tree, CAMPAIGN_TIMEOUT_SECONDS, logs / f"{mutant.name}.campaign.log"
            )
        result["campaign"] = slice_verdict(code, directory, seconds)
    result["killed"] = any(result.get(k, {}).get("killed") for k in ("suite", "campaign"))
    return result


def _cell(result: dict[str, Any], key: str) -> str:
    part = result.get(key)
    if part is None:
        return "not run"
    by = f", by its tests: {', '.join(part['tests'])}" if part.get("by") else ""
    commit = part.get("commit") or result.get("commit")
    at = f", at {commit}" if commit else ""
    if part.get("invariant"):
        where = f"case {part['case']}" if "case" in part else f"block {part.get('block')}"
        by = f", by `{part['invariant']}` in {where}"
    if part.get("error"):
        return f"not measured: {part['error']} ({part['seconds']} s{at})"
    return ("killed" if part["killed"] else "survived") + f" ({part['seconds']} s{by}{at})"


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| mutant | rule | killed by the suite | killed by the slice alone |",
        "|---|---|---|---|",
    ]
    for result in results:
        slice_cell = _cell(result, "campaign")
        if result.get("outside_slice"):
            slice_cell += f"; outside the slice: {result['outside_slice']}"
        lines.append(
            f"| {result['name']} | {result['rule']} | {_cell(result, 'suite')} | {slice_cell} |"
        )
    return "\n".join(lines)


def summary(results: list[dict[str, Any]]) -> str:
    """The figures the issue asks for: all killed by the suite; the behavioural ones (not
    outside the slice) killed by the slice alone."""

    def killed(result: dict[str, Any], key: str) -> bool:
        return bool(result.get(key, {}).get("killed"))

    behavioural = [r for r in results if not r.get("outside_slice")]
    # A part not run is no result: the shares are of the mutants that part was run against.
    against_suite = [r for r in results if "suite" in r]
    against_slice = [r for r in behavioural if "campaign" in r]
    by_slice = [r for r in against_slice if killed(r, "campaign")]
    unmeasured = sum(bool(r["campaign"].get("error")) for r in against_slice)
    share = 100 * len(by_slice) / len(against_slice) if against_slice else 0.0
    return (
        f"{len(results)} mutants: {sum(killed(r, 'suite') for r in results)} of the "
        f"{len(against_suite)} run against the suite killed by it, "
        f"{sum(r['killed'] for r in results)} killed in all; of the {len(behavioural)} "
        f"behavioural ones, {len(against_slice)} run against the campaign slice alone, "
        f"{len(by_slice)} ({share:.0f}%) of them killed by it"
        + (
            f" ({unmeasured} not measured: a crash or a timeout, counted as not killed)."
            if unmeasured
            else "."
        )
    )


def _refused(mutants: list[Mutant]) -> list[str]:
    """The mutants whose text is not found exactly once in their file, each with why."""
    refused = []
    for mutant in mutants:
        path = ROOT / mutant.file
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.count(mutant.old) != 1:
            refused.append(
                f"{mutant.name}: old text found {text.count(mutant.old)} times in {mutant.file}"
            )
    return refused


def _write_table(path: str, table: str) -> None:
    Path(path).write_text(
        "# Mutants: which check kills which bug\n\nWritten by `make mutate` "
        "(fault_campaign/mutants.py). Each mutant is one plausible bug in a safety rule, "
        "applied alone to a scratch copy; the suite is `pytest -x` over every test but the "
        "campaign slice (the tests written for the mutant's rule first, the rest only if they "
        "pass), the campaign slice is the fixed-seed slice "
        "`make test` runs (stopped at the first violation; a slice kill names the invariant "
        "and the case that reported it, a crash or a timeout is *not measured*). "
        "A mutant *outside the slice* breaks a "
        "rule no case's execution can show (an agent's or an approver's tool, a configuration "
        "the campaign's stack lacks): it counts for the suite only. Each cell says at which "
        "commit it was measured; the results are in docs/mutants.json, so a run of some "
        "mutants (`MUTANTS=...`) keeps the others' rows.\n\n" + table + "\n",
        encoding="utf-8",
    )


def _measure(mutants: list[Mutant], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each mutant's parts run on a scratch copy (or kept from an earlier run of the same tree),
    saved to `--out` as they come: a stopped run resumes."""
    tree = scratch_copy()
    check_imports(tree)
    digest = tree_digest(tree)
    commit = _commit()
    earlier = _earlier(args.out, digest)
    baseline = Baseline(tree, digest, args.out)
    if not args.skip_suite:
        baseline.require(tuple(sorted({test for m in mutants for test in m.tests})))
    print(f"mutate: scratch copy {tree} ({len(mutants)} mutants)", flush=True)
    results = []
    for mutant in mutants:
        before = earlier.get(mutant.name)
        if before is not None and all(part in before for part in parts_wanted(args)):
            result = before
        else:
            measured = {
                **run_mutant(mutant, tree, args, baseline),
                "tree": digest,
                "commit": commit,
            }
            for part in PARTS:  # each part names where it was measured
                if part in measured:
                    measured[part] = {**measured[part], "tree": digest, "commit": commit}
            result = combined(before, measured)
        results.append(result)
        _save(args.out, _merged(args.out, results))
        status = "KILLED" if result["killed"] else "SURVIVED"
        print(
            f"  {status:8} {mutant.name}: suite {result.get('suite')}, "
            f"campaign {result.get('campaign')}",
            flush=True,
        )
    return results


def main(args: argparse.Namespace) -> int:
    mutants = by_name(args.only)
    refused = _refused(mutants)
    if refused:
        print(
            "mutate: these mutants no longer apply (refresh fault_campaign/mutants.py):",
            file=sys.stderr,
        )
        for line in refused:
            print(f"  {line}", file=sys.stderr)
        return 2
    if args.check:
        print(f"mutate: all {len(mutants)} mutants apply exactly once")
        return 0
    try:
        results = _measure(mutants, args)
    except (MutantDoesNotApply, BaselineFails) as exc:
        print(f"mutate: {exc}", file=sys.stderr)
        return 2
    results = _merged(args.out, results)
    table = _table(results) + "\n\n" + summary(results)
    never = [m.name for m in MUTANTS if m.name not in {r["name"] for r in results}]
    if never:
        table += f"\n\nNot run yet ({len(never)}): {', '.join(f'`{n}`' for n in never)}."
    print(table)
    if args.table:
        _write_table(args.table, table)
    survivors = [r["name"] for r in results if not r["killed"]]
    if survivors:
        print(f"mutate: {len(survivors)} mutant(s) survived: {survivors}", file=sys.stderr)
        return 1
    print(f"mutate: all {len(results)} mutants killed")
    return 0
