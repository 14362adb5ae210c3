"""`run`: synthesize once, start the shards, show progress, summarize (and write the report).

The run's directory holds `campaign.json` (its configuration: a resumed run must match it),
the synthesized template, one `shard-<k>.jsonl` per shard and `failures/`. Running the same
command again resumes: each shard skips the blocks it has on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fault_campaign.shards import CampaignConfig, read_lines

FAKE_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_REAL_AWS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN")


# The fixed-seed slice `make test` runs (tests/campaign/test_campaign_slice.py) and `make mutate`
# runs against each mutant: the same cases, so "killed by the campaign slice" means that slice.
SLICE_SEED = 20261
SLICE_CASES = 300
SLICE_SHARDS = 2
SLICE_BLOCK_SIZE = 25


def slice_command(directory: Path, *, fail_fast: bool = False) -> list[str]:
    """The command line of the campaign slice, its results in `directory`."""
    command = [
        "-m",
        "fault_campaign",
        "run",
        "--seed",
        str(SLICE_SEED),
        "--cases",
        str(SLICE_CASES),
        "--shards",
        str(SLICE_SHARDS),
        "--block-size",
        str(SLICE_BLOCK_SIZE),
        "--dir",
        str(directory),
    ]
    return [*command, "--fail-fast"] if fail_fast else command


def shard_environment(time_scale: float) -> dict[str, str]:
    """Fake credentials and no way to a real account, for the shard processes."""
    env = {k: v for k, v in os.environ.items() if k not in _REAL_AWS}
    env.update(FAKE_ENVIRONMENT)
    env["SAGA_LOCAL_TIME_SCALE"] = str(time_scale)
    return env


def template_of(directory: Path) -> Path:
    """The stack synthesized once per run (python app.py with the campaign's context,
    fault_campaign.approval.campaign_context), shared by every shard."""
    from fault_campaign.approval import campaign_context
    from local_aws.synth import synthesize

    outdir = directory / "cdk.out"
    found = sorted(outdir.glob("*.template.json")) if outdir.exists() else []
    if found:
        return found[0]
    return synthesize(outdir, context=campaign_context()).template_path


def prepare(directory: Path, config: CampaignConfig) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "campaign.json"
    if path.exists():
        existing = json.loads(path.read_text(encoding="utf-8"))
        if existing != config.to_json():
            raise SystemExit(
                f"campaign: {directory} holds a run of {existing}; this command asks for "
                f"{config.to_json()}: use another directory (or remove it) to start over"
            )
    else:
        path.write_text(json.dumps(config.to_json(), indent=2) + "\n", encoding="utf-8")


def load_results(directory: Path) -> list[dict[str, Any]]:
    """Every block line of every shard, in block order."""
    blocks: list[dict[str, Any]] = []
    for path in sorted(directory.glob("shard-*.jsonl")):
        blocks.extend(line for line in read_lines(path) if line.get("type") == "block")
    return sorted(blocks, key=lambda line: line["block"])


def _progress(
    directory: Path, config: CampaignConfig, started: float, base: int
) -> tuple[int, int]:
    blocks = load_results(directory)
    cases = sum(len(b["cases"]) for b in blocks)
    violations = sum(len(c["violations"]) for b in blocks for c in b["cases"]) + sum(
        len(b["violations"]) for b in blocks
    )
    elapsed = time.monotonic() - started
    rate = (cases - base) / elapsed if elapsed > 0 else 0.0
    print(
        f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] {cases}/{config.cases} cases "
        f"({rate:.2f}/s this session), violations {violations}",
        flush=True,
    )
    return cases, violations


def run(directory: Path, config: CampaignConfig, *, fail_fast: bool = False) -> int:
    prepare(directory, config)
    commit = directory / "commit"
    if not commit.exists():
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        )
        commit.write_text(head.stdout.strip() or "unknown", encoding="utf-8")
    template = template_of(directory)
    base = sum(len(b["cases"]) for b in load_results(directory))
    started = time.monotonic()
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fault_campaign",
                "shard",
                "--dir",
                str(directory),
                "--template",
                str(template),
                "--shard",
                str(shard),
                *(["--fail-fast"] if fail_fast else []),
            ],
            env=shard_environment(config.time_scale),
        )
        for shard in range(config.shards)
    ]
    try:
        while any(p.poll() is None for p in processes):
            time.sleep(5)
            _, violations = _progress(directory, config, started, base)
            if fail_fast and (violations or any(p.poll() == 3 for p in processes)):
                for process in processes:
                    if process.poll() is None:
                        process.send_signal(signal.SIGTERM)
    except KeyboardInterrupt:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        raise
    cases, violations = _progress(directory, config, started, base)
    codes = [p.wait() for p in processes]
    if any(code not in (0, 3) for code in codes) and not fail_fast:
        print(f"campaign: shard exit codes {codes}", file=sys.stderr)
        return 1
    if violations or any(code == 3 for code in codes):
        return 3
    return 0 if cases >= config.cases else 1
