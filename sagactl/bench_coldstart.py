"""Cold-start benchmark: each handler's import plus its first clients, against a bare handler.

    python -m sagactl.bench_coldstart [--runs N]      (also part of `make bench`)

A Lambda cold start imports the handler module, then the first invocation builds its clients.
Both are measured here, in a fresh interpreter per run (cwd `lambdas/`, the asset root, with a
Lambda-like environment: function name set, so Powertools behaves as on AWS; fake credentials):

- `bare`: a handler module that imports boto3 and creates a DynamoDB client, the baseline;
- each saga handler: `import saga.handlers.<name>` plus the clients its first invocation makes
  (the same calls the handler makes: `Runtime` and its DynamoDB clients, the sweeper's SQS
  client), without any request.

Runs alternate between the subjects (bare, handler, handler, ..., bare, ...) so that a slow
moment of a shared machine hits them all alike, and each subject's figure is the median of its
runs. The ratio is handler / bare, both from this one run of the benchmark. Interpreter startup
is outside the timed part for every subject. Durations are reported, never asserted; the module
counts are asserted in tests/unit/test_cold_start_imports.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LAMBDAS_DIR = PROJECT_ROOT / "lambdas"
BARE = "bare"
HANDLERS = (
    "validate_case",
    "reserve_stock",
    "issue_refund",
    "create_shipment",
    "release_reservation",
    "reconcile_action",
    "record_outcome",
    "sweep_stuck_actions",
)

# What each handler's first invocation builds after the import (no request is sent).
_RUNTIME = (
    "from saga import settings\nfrom saga.tools.wiring import Runtime\n"
    "runtime = Runtime.from_env(getattr(settings, {model!r}))\nruntime.client\n"
)
_DOWNSTREAM = "runtime.downstream_client\n"
FIRST_CLIENTS: Mapping[str, str] = {
    "validate_case": _RUNTIME,
    "reserve_stock": _RUNTIME,
    "issue_refund": _RUNTIME + _DOWNSTREAM,
    "create_shipment": _RUNTIME + _DOWNSTREAM,
    "release_reservation": _RUNTIME,
    "reconcile_action": _RUNTIME + _DOWNSTREAM,
    "record_outcome": _RUNTIME,
    "sweep_stuck_actions": (
        "from saga.aws import dynamodb_client\ndynamodb_client()\n"
        "module.boto3.client('sqs', config=module.SQS_CONFIG)\n"
    ),
}

BARE_HANDLER = '''"""The baseline: a handler that imports boto3 and makes one DynamoDB client."""
import boto3

def handler(event, context):
    return boto3.client("dynamodb").describe_limits()
'''
BARE_FIRST_CLIENT = "module.boto3.client('dynamodb')\n"

# Timed from just before the handler import to just after its first clients; prints JSON.
_CHILD = """\
import sys, time
before = set(sys.modules)
start = time.perf_counter()
import importlib
module = importlib.import_module({module!r})
{first_clients}
elapsed = time.perf_counter() - start
new = sorted(set(sys.modules) - before)
import json
print(json.dumps({{"seconds": elapsed, "modules": new}}))
"""

# The runtime's part of a Lambda environment; each function's own part comes from its model.
LAMBDA_RUNTIME_ENVIRONMENT: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
}


@dataclass(frozen=True)
class Function:
    model: str  # its environment model in saga.settings
    environment: Mapping[str, str]


def function_environments() -> dict[str, Function]:
    """Each handler's environment as the stack renders it (its model, cdk.json's values, a
    stand-in name for each table and the queue)."""
    from saga.settings import TABLES, table_field
    from stacks.config import SagaConfig
    from stacks.constructs.tools import TOOL_SPECS
    from stacks.saga_stack import PROJECT_ROOT as STACK_ROOT

    context = json.loads((STACK_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    config = SagaConfig.from_mapping(context)
    values = {
        "powertools_metrics_namespace": "ReplacementOrderSaga-bench",
        "powertools_log_level": config.functions.log_level,
        "attempt_budget": config.ledger.attempt_budget,
        "retention_seconds": config.ledger.retention_seconds,
        "lease_margin_seconds": config.ledger.lease_margin_seconds,
        "payment_key_retention_seconds": config.payment_key_retention_hours * 3600,
        "downstream_timeout_seconds": config.downstream_timeout_seconds,
        "tenants": config.tenants,
        "escalation_queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
        "stuck_grace_seconds": config.monitoring.stuck_grace_seconds,
        **{table_field(t): f"bench-{t}" for t in TABLES},
    }
    return {
        spec.handler.split(".")[-2]: Function(
            spec.environment.__name__,
            spec.environment.render({**values, "powertools_service_name": spec.service}),
        )
        for spec in TOOL_SPECS
    }


@dataclass(frozen=True)
class ColdStart:
    subject: str  # "bare" or the handler module
    median_ms: float
    modules: int
    xray_imported: bool
    ratio: float  # median / the bare handler's median (1.0 for the bare handler)


@dataclass(frozen=True)
class ColdStartRun:
    seconds: float
    modules: frozenset[str]  # imported by the timed part

    @property
    def xray(self) -> bool:
        return any(m.split(".")[0] == "aws_xray_sdk" for m in self.modules)


def _environment(subject: str, function: Function | None) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "SYSTEMROOT"}}
    own = function.environment if function is not None else {}
    env = {**keep, **LAMBDA_RUNTIME_ENVIRONMENT, **own}
    env["AWS_LAMBDA_FUNCTION_NAME"] = f"bench-{subject}"
    env["_HANDLER"] = f"{_module(subject)}.handler"
    # Nothing may reach a real account or read a developer's configuration.
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


def _module(subject: str) -> str:
    return "bare_handler" if subject == BARE else f"saga.handlers.{subject}"


def child_code(subject: str, function: Function | None) -> str:
    if function is None:
        first = BARE_FIRST_CLIENT
    else:
        first = FIRST_CLIENTS[subject].replace("{model!r}", repr(function.model))
    return _CHILD.format(module=_module(subject), first_clients=first)


def run_cold_start(subject: str, bare_dir: Path, function: Function | None) -> ColdStartRun:
    """One fresh interpreter: the subject's import and first clients."""
    cwd = bare_dir if subject == BARE else LAMBDAS_DIR
    done = subprocess.run(
        [sys.executable, "-c", child_code(subject, function)],
        cwd=cwd,
        env=_environment(subject, function),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cold start of {subject} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return ColdStartRun(float(result["seconds"]), frozenset(result["modules"]))


@contextmanager
def bare_handler_dir() -> Iterator[Path]:
    """A directory with the bare handler module, its bytecode written (as saga's is)."""
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        bare_dir = Path(tmp)
        (bare_dir / "bare_handler.py").write_text(BARE_HANDLER, encoding="utf-8")
        run_cold_start(BARE, bare_dir, None)
        yield bare_dir


def measure_cold_starts(runs: int, subjects: tuple[str, ...] = HANDLERS) -> list[ColdStart]:
    """`runs` fresh interpreters per subject, alternating; the bare handler first."""
    order = (BARE, *subjects)
    functions = function_environments()
    samples: dict[str, list[ColdStartRun]] = {s: [] for s in order}
    with bare_handler_dir() as bare_dir:
        for _ in range(runs):
            for subject in order:
                function = functions.get(subject)
                samples[subject].append(run_cold_start(subject, bare_dir, function))
    bare = statistics.median(r.seconds for r in samples[BARE])
    results = []
    for subject in order:
        median = statistics.median(r.seconds for r in samples[subject])
        results.append(
            ColdStart(
                subject=_module(subject) if subject != BARE else BARE,
                median_ms=round(median * 1000, 1),
                modules=max(len(r.modules) for r in samples[subject]),
                xray_imported=any(r.xray for r in samples[subject]),
                ratio=round(median / bare, 2),
            )
        )
    return results


def format_cold_starts(results: list[ColdStart], runs: int) -> str:
    lines = [
        f"cold start: import + first clients, median of {runs} fresh interpreters each",
        f"{'handler':<40} {'modules':>7} {'median ms':>9} {'x bare':>6} {'X-Ray SDK':>9}",
    ]
    for r in results:
        lines.append(
            f"{r.subject:<40} {r.modules:>7} {r.median_ms:>9} {r.ratio:>6.2f} "
            f"{'yes' if r.xray_imported else 'no':>9}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sagactl.bench_coldstart", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per subject")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    results = measure_cold_starts(args.runs)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(format_cold_starts(results, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
