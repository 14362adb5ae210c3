"""python -m fault_campaign {run,shard,replay,report,mutate} (see `make campaign`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fault_campaign.shards import CampaignConfig

DEFAULT_DIR = Path(".campaign")


def _config(args: argparse.Namespace) -> CampaignConfig:
    return CampaignConfig(
        seed=args.seed,
        cases=args.cases,
        block_size=args.block_size,
        shards=args.shards,
        time_scale=args.time_scale,
    )


def _run(args: argparse.Namespace) -> int:
    from fault_campaign import orchestrate

    directory = args.dir or DEFAULT_DIR / f"seed-{args.seed}-n{args.cases}"
    config = _config(args)
    command = " ".join(["python -m fault_campaign", *sys.argv[1:]])
    status = orchestrate.run(directory, config, fail_fast=args.fail_fast)
    if args.report:
        from fault_campaign import report

        written = report.write(directory, Path(args.report), command=args.command or command)
        print(f"report: {written}", flush=True)
    return status


def _shard(args: argparse.Namespace) -> int:
    from fault_campaign.shards import run_shard

    config = CampaignConfig(**json.loads((args.dir / "campaign.json").read_text(encoding="utf-8")))
    return run_shard(config, args.shard, args.dir, args.template, fail_fast=args.fail_fast)


def _replay(args: argparse.Namespace) -> int:
    from fault_campaign import orchestrate
    from fault_campaign.generator import generate
    from fault_campaign.plan import CasePlan
    from fault_campaign.shards import local_aws, run_alone

    if args.plan_json:
        plan = CasePlan.from_json(json.loads(args.plan_json))
    else:
        plan = generate(args.seed, args.case, block_size=args.block_size)
    directory = args.dir or DEFAULT_DIR / "replay"
    directory.mkdir(parents=True, exist_ok=True)
    template = orchestrate.template_of(directory)
    print(f"case {plan.index} (seed {plan.seed}): {plan.dumps()}", file=sys.stderr)
    with local_aws(template, args.time_scale) as local:
        result = run_alone(local, plan, block_size=args.block_size)
    summary = {k: result[k] for k in ("case_id", "outcome", "executions", "fired", "checks")}
    print(json.dumps(summary, ensure_ascii=False), file=sys.stderr)
    for violation in result["violations"]:
        print(f"VIOLATION {violation['invariant']}: {violation['detail']}", file=sys.stderr)
    return 3 if result["violations"] else 0


def _report(args: argparse.Namespace) -> int:
    from fault_campaign import report

    written = report.write(args.dir, Path(args.out), command=args.command)
    print(f"report: {written}")
    return 0


def _allowances(args: argparse.Namespace) -> int:
    """Print the allowed alternatives' table into docs/invariants.md (or to stdout)."""
    from fault_campaign import honesty

    if not args.write:
        print(honesty.render(), end="")
        return 0
    page = Path(args.write)
    page.write_text(honesty.reprinted(page.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"allowances: {page}")
    return 0


def _mutate(args: argparse.Namespace) -> int:
    from fault_campaign import mutate

    return mutate.main(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fault_campaign", description=__doc__)
    commands = parser.add_subparsers(dest="command_name", required=True)

    run = commands.add_parser("run", help="run a campaign in shards (resumable)")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--cases", type=int, default=10_000)
    run.add_argument("--shards", type=int, default=3)
    run.add_argument("--block-size", type=int, default=50)
    run.add_argument("--time-scale", type=float, default=0.02)
    run.add_argument("--dir", type=Path, default=None)
    run.add_argument("--fail-fast", action="store_true")
    run.add_argument(
        "--report", default=None, help="write the report there (e.g. docs/campaign.md)"
    )
    run.add_argument("--command", default=None, help="the command the report quotes")
    run.set_defaults(handler=_run)

    shard = commands.add_parser("shard", help="(internal) run one shard's blocks")
    shard.add_argument("--dir", type=Path, required=True)
    shard.add_argument("--template", type=Path, required=True)
    shard.add_argument("--shard", type=int, required=True)
    shard.add_argument("--fail-fast", action="store_true")
    shard.set_defaults(handler=_shard)

    replay = commands.add_parser("replay", help="run one case alone and check it")
    replay.add_argument("--seed", type=int, default=1)
    replay.add_argument("--case", type=int, default=0)
    replay.add_argument("--block-size", type=int, default=50)
    replay.add_argument("--plan-json", default=None, help="a (shrunk) plan instead of seed/case")
    replay.add_argument("--time-scale", type=float, default=0.02)
    replay.add_argument("--dir", type=Path, default=None)
    replay.set_defaults(handler=_replay)

    rep = commands.add_parser("report", help="write the report of a run directory")
    rep.add_argument("--dir", type=Path, required=True)
    rep.add_argument("--out", default="docs/campaign.md")
    rep.add_argument("--command", default=None)
    rep.set_defaults(handler=_report)

    allowed = commands.add_parser(
        "allowances", help="the table of allowed alternatives (docs/invariants.md prints it)"
    )
    allowed.add_argument("--write", default=None, help="rewrite its block in this page")
    allowed.set_defaults(handler=_allowances)

    mut = commands.add_parser("mutate", help="apply each curated mutant to a scratch copy")
    mut.add_argument("--only", action="append", default=[], help="mutant names (default: all)")
    mut.add_argument("--skip-suite", action="store_true")
    mut.add_argument("--skip-campaign", action="store_true")
    mut.add_argument("--check", action="store_true", help="only check each mutant applies once")
    mut.add_argument("--out", default=None, help="the results as JSON (a rerun resumes them)")
    mut.add_argument("--table", default=None, help="the table as Markdown (docs/mutants.md)")
    mut.set_defaults(handler=_mutate)

    args = parser.parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
