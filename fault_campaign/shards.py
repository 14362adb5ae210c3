"""Shards: separate processes, each with its own local AWS (its own port, its own clock).

Handlers share process state (os.environ, module globals), so one process runs one case at a
time; parallelism is processes. Cases are cut into blocks (one fresh local account each, with
the block's stock); block b belongs to shard b mod shards. A shard appends one line per block
to `<dir>/shard-<k>.jsonl` (flushed and fsynced) and skips the blocks already there, so a run
that was stopped resumes where it was. A failing case is shrunk after its block and written
to `<dir>/failures/`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fault_campaign.approval import create_two_names_key
from fault_campaign.generator import block_stock, generate
from fault_campaign.invariants import check_account, check_case
from fault_campaign.observe import Observer
from fault_campaign.paths import case_outcome, classify
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRun, CaseRunner
from fault_campaign.shrink import shrink
from local_aws.server_errors import recent_server_errors

MAX_SHRINKS_PER_SHARD = 3


@dataclass(frozen=True)
class CampaignConfig:
    seed: int
    cases: int
    block_size: int
    shards: int
    time_scale: float

    def blocks_of(self, shard: int) -> list[int]:
        count = (self.cases + self.block_size - 1) // self.block_size
        return [block for block in range(count) if block % self.shards == shard]

    def indices(self, block: int) -> range:
        start = block * self.block_size
        return range(start, min(self.cases, start + self.block_size))

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def replay_command(plan: CasePlan, *, block_size: int) -> str:
    return (
        f".venv/bin/python -m fault_campaign replay --seed {plan.seed} --case {plan.index} "
        f"--block-size {block_size}"
    )


def replay_plan_command(plan: CasePlan) -> str:
    return f".venv/bin/python -m fault_campaign replay --plan-json {shlex.quote(plan.dumps())}"


def case_result(run: CaseRun, budget: int) -> dict[str, Any]:
    checks = check_case(run, budget)
    final = run.final
    owner = final.executions.get(run.owner_arn or "") or {}
    result: dict[str, Any] = {
        "index": run.plan.index,
        "case_id": run.plan.case_id,
        "classes": sorted({*run.plan.fault_classes(), *run.labels}),
        "outcome": case_outcome(owner, final.case_record),
        "invalid": run.plan.invalid,  # which way a case generated invalid is (generator.py)
        # every class an execution of the case closed in, before a redrive or a person's
        # decision too (the report counts each terminal state the slice reached)
        "closes": sorted({classify(e) for snap in run.snapshots for e in snap.executions.values()}),
        "operator": [
            {k: v for k, v in e.items() if k in ("step", "resolved", "error", "refused")}
            for e in run.operator
        ],
        "reason": ((owner.get("output") or {}).get("escalation") or {}).get("reason"),
        "path": owner.get("path"),
        "executions": {e["name"]: classify(e) for e in final.executions.values()},
        "fired": run.fired,
        "checks": checks.run,
        "checks_by": dict(checks.by_invariant),
        "violations": checks.violations,
        "retries": sum(e["retries"] for e in final.executions.values()),
        "reconciliations": sum(e["reconciliations"] for e in final.executions.values()),
        "invocations": sum(e["invocations"] for e in final.executions.values()),
        "redrives": run.redrives,
        "overlaps": run.overlaps,
        "stock_before": run.stock_before,
        "seconds": round(run.seconds, 3),
    }
    if checks.violations:
        result["plan"] = run.plan.to_json()
        result["snapshots"] = [s.to_json() for s in run.snapshots]
        result["messages"] = run.messages
    return result


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    # Bytes first: the progress reader meets the line a shard is writing, cut anywhere (inside
    # a multi-byte character too, which failed the whole file's decoding).
    for raw in path.read_bytes().splitlines():
        try:
            lines.append(json.loads(raw.decode("utf-8")))
        except ValueError:  # UnicodeDecodeError included
            break  # a line being written, or cut by a kill: the block runs again
    return lines


def append_line(path: Path, document: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(document, ensure_ascii=False, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def local_aws(template: Path, time_scale: float) -> Iterator[Any]:
    """A local AWS of this process (its own port and clock), handler output dropped."""
    from local_aws.emulator import LocalServer
    from local_aws.environment import LocalAws, StackSource
    from local_aws.lambda_runtime import quiet_handlers

    with quiet_handlers(None):
        server = LocalServer(port=0, time_scale=time_scale)
        server.start()
        retry_waits_pass_on_the_clock()
        try:
            local = LocalAws(server=server, source=StackSource.from_file(template))
            yield local
        finally:
            server.stop()


class _WaitsPassOnTheClock:
    """Stands in for the scaled clock of moto's Retry: a scaled sleep also moves the local
    clock by the time it skipped, so a lease still runs out during the retries that would
    outlast it on AWS (the `pending` policy's minutes against a 40-second lease)."""

    def __init__(self, scaled: Any) -> None:
        self.scaled = scaled

    def sleep(self, seconds: float) -> None:
        from local_aws.clock import LOCAL_CLOCK
        from local_aws.emulator import retry_time_scale

        self.scaled.sleep(seconds)
        skipped = max(0.0, seconds * (1.0 - retry_time_scale()))
        if skipped:
            LOCAL_CLOCK.advance(skipped)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scaled, name)


def retry_waits_pass_on_the_clock() -> None:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    current = retrier_decl.time  # type: ignore[attr-defined]
    if not isinstance(current, _WaitsPassOnTheClock):
        retrier_decl.time = _WaitsPassOnTheClock(current)  # type: ignore[attr-defined,assignment]


def fresh_account(local: Any, stock: dict[str, int]) -> Observer:
    local.stock = dict(stock)
    local.reprovision()
    create_two_names_key(local.client("kms"), region=local.server.region)
    for name, value in local.environment.items():
        os.environ[name] = value
    return Observer(local)


def run_alone(
    local: Any, plan: CasePlan, *, block_size: int, budget: int | None = None
) -> dict[str, Any]:
    """A case alone in a fresh account (its twin first), as `replay` and the shrinker run it."""
    stock = plan.stock or block_stock(plan.seed, plan.index // block_size)
    observer = fresh_account(local, stock)
    budget = budget or int(observer.outputs["AttemptBudget"])
    runner = CaseRunner(observer)
    if plan.twin_of is not None:
        sibling = generate(plan.seed, plan.twin_of, block_size=block_size)
        sibling.nemeses, sibling.duplicate, sibling.operator = [], None, None
        runner.run(sibling)
    return case_result(runner.run(plan), budget)


def _shrink_failure(
    local: Any, result: dict[str, Any], config: CampaignConfig, directory: Path
) -> None:
    plan = CasePlan.from_json(result["plan"])
    sku = plan.case["reserve"]["sku"]
    stock = dict(block_stock(plan.seed, plan.index // config.block_size))
    if result.get("stock_before") is not None:
        stock[sku] = int(result["stock_before"])
    plan.stock = stock
    names = {v["invariant"] for v in result["violations"]}

    def fails(candidate: CasePlan) -> bool:
        try:
            again = run_alone(local, candidate, block_size=config.block_size)
        except Exception:
            return False
        return bool(names & {v["invariant"] for v in again["violations"]})

    reproduced = fails(plan)
    minimal, runs = shrink(plan, fails) if reproduced else (plan, 0)
    failures = directory / "failures"
    failures.mkdir(exist_ok=True)
    report = {
        "index": plan.index,
        "seed": plan.seed,
        "invariants": sorted(names),
        "reproduced_alone": reproduced,
        "shrink_runs": runs,
        "plan": plan.to_json(),
        "minimal_plan": minimal.to_json(),
        "replay": replay_command(plan, block_size=config.block_size),
        "replay_minimal": replay_plan_command(minimal),
        "violations": result["violations"],
    }
    (failures / f"case-{plan.index}.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    print(
        f"FAILED case {plan.index} (seed {plan.seed}): {sorted(names)}\n"
        f"  fault plan: {json.dumps(plan.faults)} nemeses {json.dumps(plan.nemeses)}\n"
        f"  minimal plan ({runs} runs, reproduced alone: {reproduced}): "
        f"faults {json.dumps(minimal.faults)} nemeses {json.dumps(minimal.nemeses)} "
        f"duplicate {minimal.duplicate} redrives {minimal.redrives}\n"
        f"  replay: {replay_command(plan, block_size=config.block_size)}\n"
        f"  replay minimal: {replay_plan_command(minimal)}",
        file=sys.stderr,
        flush=True,
    )


def _error_result(index: int, plan: CasePlan, exc: Exception) -> dict[str, Any]:
    """A case that could not run to its end: a violation of its own, with the traceback."""
    return {
        "index": index,
        "case_id": plan.case_id,
        "classes": plan.fault_classes(),
        "outcome": "ERROR",
        "checks": 1,
        "violations": [{"invariant": "case_ran", "detail": f"{type(exc).__name__}: {exc}"}],
        "plan": plan.to_json(),
        "traceback": traceback.format_exc(),
        # A 500 of the local AWS says only "Internal Server Error": its own traceback.
        "server_errors": recent_server_errors(),
    }


def _run_block_cases(
    local: Any, config: CampaignConfig, block: int, stock: dict[str, int], fail_fast: bool
) -> tuple[Observer, list[CaseRun], list[dict[str, Any]]]:
    """The block's cases in a fresh account, each checked: the account's observer (a new one
    after a case that could not run), the runs the account checks cover, the results."""
    observer = fresh_account(local, stock)
    budget = int(observer.outputs["AttemptBudget"])
    runner = CaseRunner(observer)
    runs: list[CaseRun] = []
    results: list[dict[str, Any]] = []
    for index in config.indices(block):
        plan = generate(config.seed, index, block_size=config.block_size)
        try:
            run = runner.run(plan)
        except Exception as exc:
            results.append(_error_result(index, plan, exc))
            if fail_fast:
                break
            observer = fresh_account(local, stock)
            runner = CaseRunner(observer)
            runs = []
            continue
        runs.append(run)
        results.append(case_result(run, budget))
        if results[-1]["violations"] and fail_fast:
            break
    return observer, runs, results


def run_shard(
    config: CampaignConfig, shard: int, directory: Path, template: Path, *, fail_fast: bool = False
) -> int:
    """Run the shard's blocks not yet on disk. Exit status: 0, or 3 when a case failed."""
    path = directory / f"shard-{shard}.jsonl"
    done = {line["block"] for line in read_lines(path) if line.get("type") == "block"}
    failed = any(
        c["violations"] for line in read_lines(path) for c in line.get("cases", [])
    ) or any(line.get("violations") for line in read_lines(path))
    shrinks = 0
    with local_aws(template, config.time_scale) as local:
        for block in config.blocks_of(shard):
            if block in done:
                continue
            if failed and fail_fast:
                break
            started = time.time()
            stock = block_stock(config.seed, block)
            observer, runs, results = _run_block_cases(local, config, block, stock, fail_fast)
            account = check_account(
                runs,
                stock,
                {sku: observer.stock(sku) for sku in stock},
                observer.scan_all("ReservationsTableName"),
                observer.scan_all("PaymentsTableName"),
                observer.scan_all("ShipmentsTableName"),
            )
            failed = failed or any(r["violations"] for r in results) or bool(account.violations)
            append_line(
                path,
                {
                    "type": "block",
                    "block": block,
                    "shard": shard,
                    "started": started,
                    "ended": time.time(),
                    # What else ran: the rate means little without it on a shared machine.
                    "load": os.getloadavg()[0],
                    "cpus": os.cpu_count(),
                    "cases": results,
                    "account_checks": account.run,
                    "account_checks_by": dict(account.by_invariant),
                    "violations": account.violations,
                },
            )
            if not fail_fast:
                for result in results:
                    if (
                        result["violations"]
                        and "plan" in result
                        and shrinks < MAX_SHRINKS_PER_SHARD
                    ):
                        shrinks += 1
                        _shrink_failure(local, result, config, directory)
    return 3 if failed else 0
