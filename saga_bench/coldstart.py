"""Cold-start benchmark: each handler's import plus its first clients, against a bare handler.

    python -m saga_bench.coldstart [--runs N]      (also part of `make bench`)

A Lambda cold start imports the handler module, then the first invocation builds its clients.
Both are measured here, in a fresh interpreter per run (cwd `lambdas/`, the asset root, with a
Lambda-like environment: function name and runtime API set, so Powertools and saga.coldstart
behave as on AWS; the function's own environment as the stack renders it; fake credentials):

- `bare`: a handler module that imports boto3 and creates a DynamoDB client, the baseline;
- each saga handler: `import saga.handlers.<name>`, then what its first invocation builds
  (`FIRST_CLIENTS`): its event (an approved example case) validated with its payload model and
  the approval verified, its result model built, the Runtime with its environment validated, its
  DynamoDB clients, the ledger, tables and ports the handler asks for, the sweeper's SQS client;
  no request is sent. Then the end of that invocation (the collector resumes,
  saga/coldstart.py). A model pydantic builds on first use is therefore measured all the same.

Runs alternate: every handler run follows a bare run of its own, so that a slow moment of a
shared machine hits both alike; the ratio is the median over rounds of handler / bare of each
pair, both from this one run of the benchmark, and the times are medians too. Interpreter
startup is outside the timed part for every subject. Durations are reported, never asserted;
the module counts are asserted in tests/unit/test_cold_start.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from sagactl.paths import PROJECT_ROOT
from stacks.layer_lock import LEFT_OUT_OF_LAYER

LAMBDAS_DIR = PROJECT_ROOT / "lambdas"
BARE = "bare"
# Every handler module of the Lambda package.
HANDLERS = tuple(
    sorted(p.stem for p in (LAMBDAS_DIR / "saga" / "handlers").glob("*.py") if p.stem != "__init__")
)

# IssueRefund with refunds going to Stripe (`payments=stripe`), measured beside the sandbox's.
STRIPE_REFUND = "issue_refund+stripe"
SUBJECTS = (*HANDLERS, STRIPE_REFUND)

# What each handler's first invocation builds after the import, no request sent: its event
# validated and its result model built, the Runtime (its environment validated), its clients and
# the collaborators the handler asks it for, the modules they import included; then what the end
# of that invocation does: end the cold start's pause of the collector.
EXAMPLE_CASE = PROJECT_ROOT / "examples" / "happy-path.json"
_ATTEMPT = {"execution": "arn:aws:states:us-east-1:123456789012:execution:bench:b", "state": "B"}


def _parsed(payload_model: str, result_model: str, case: str = "payload.case") -> str:
    """The handler's event validated as it does (`event` is set before the timed part)."""
    return (
        f"from saga.models import {payload_model}, {result_model}, parse_case, parse_model\n"
        "from saga.models import verify_approval\n"
        f"payload = parse_model({payload_model}, event, what='bench')\n"
        f"case = {case}\nverify_approval(case)\n{result_model}.model_rebuild()\n"
    )


_STEP = _parsed("ToolPayload", "StepResult")
_RUNTIME = (
    "from saga import settings\nfrom saga.tools.wiring import Runtime\n"
    "runtime = Runtime.from_env(getattr(settings, {model!r}))\nruntime.client\n"
)
_LEDGER = "runtime.ledger()\n"
# The ledger's operations its first request runs (each family is imported on first use).
_EXTERNAL = "import saga.ledger.external\n"
_NATIVE = "import saga.ledger.transaction\n"
_RECONCILE = "import saga.ledger.reconcile\n"
_CASES = "runtime.cases()\n"
_RESERVE = "from saga.identity import Operation\nruntime.inventory(case, Operation.RESERVE)\n"
_RELEASE = "from saga.identity import Operation\nruntime.inventory(case, Operation.RELEASE)\n"
_PAYMENTS = "runtime.payment_provider(case)\n"
_CARRIER = "runtime.carrier(case)\n"
# Stripe's provider as Runtime.payment_provider builds it, all but the key's GetSecretValue
# (a request): the Secrets Manager client and Powertools' provider, the SDK's client.
_STRIPE_PAYMENTS = (
    "from aws_lambda_powertools.utilities.parameters import SecretsProvider\n"
    "from saga.aws import secretsmanager_client\n"
    "from saga.tools.wiring import _secrets_provider\n"
    "_secrets_provider(SecretsProvider, secretsmanager_client())\n"
    "from saga.providers.stripe_provider import StripePaymentProvider, stripe_client\n"
    "StripePaymentProvider(stripe_client('sk_test_bench', "
    "runtime.env.downstream_timeout_seconds, None), payment_reference='pi_bench')\n"
)
# The approval check: what the signature covers, the verifier and its KMS client, the case
# record it falls back on (the GetPublicKey and the read are requests).
_APPROVALS = "case.signed_approval()\nruntime.approvals.keys.client_factory()\n" + _CASES
# The reconciler of the event's step, as the handler builds it (its tool and downstream only).
_RECONCILER = "runtime.reconciler(case, payload.step)\n"
_END_OF_FIRST_INVOCATION = "from saga.coldstart import resume_collection\nresume_collection()\n"
FIRST_CLIENTS: Mapping[str, str] = {
    "validate_case": (
        _parsed("ValidatePayload", "ValidateResult", case="parse_case(payload.case)")
        + _RUNTIME
        + "runtime.tenants\n"
        + _APPROVALS
    ),
    "reserve_stock": _STEP + _RUNTIME + _APPROVALS + _LEDGER + _NATIVE + _RESERVE,
    "issue_refund": _STEP + _RUNTIME + _APPROVALS + _LEDGER + _EXTERNAL + _PAYMENTS,
    STRIPE_REFUND: _STEP + _RUNTIME + _APPROVALS + _LEDGER + _EXTERNAL + _STRIPE_PAYMENTS,
    "create_shipment": _STEP + _RUNTIME + _APPROVALS + _LEDGER + _EXTERNAL + _CARRIER,
    "release_reservation": _STEP + _RUNTIME + _APPROVALS + _LEDGER + _EXTERNAL + _RELEASE,
    "reconcile_action": (
        _parsed("ReconcilePayload", "ReconcileResult")
        + _RUNTIME
        + _APPROVALS
        + _LEDGER
        + _RECONCILE
        + _RECONCILER
    ),
    "record_outcome": _parsed("OutcomePayload", "OutcomeResult") + _RUNTIME + _APPROVALS,
    "sweep_stuck_actions": (
        "from saga.aws import dynamodb_client, sqs_client\ndynamodb_client()\nsqs_client()\n"
    ),
    # A tool call carries arguments, not a case: the verifier's client, the tables, the start.
    "agent_tools": (
        _RUNTIME + "runtime.approvals.keys.client_factory()\n" + _CASES + "runtime.stepfunctions\n"
    ),
}

BARE_HANDLER = '''"""The baseline: a handler that imports boto3 and makes one DynamoDB client."""
import boto3

def handler(event, context):
    return boto3.client("dynamodb").describe_limits()
'''
BARE_FIRST_CLIENT = "module.boto3.client('dynamodb')\n"

# Timed from just before the handler import to just after its first clients; prints JSON. The
# runtime hands the handler its event decoded: that happens before the timed part.
# Packages of the virtualenv that the Lambda layer does not hold and an import probes for (the
# Stripe SDK looks for an async HTTP library, and for `requests`, which the layer leaves out):
# absent in the child, as on Lambda.
NOT_IN_LAYER = ("httpx", "anyio", "aiohttp", *sorted(left for _, left in LEFT_OUT_OF_LAYER))
_CHILD = """\
import sys, time, json
sys.modules.update(dict.fromkeys({not_in_layer!r}))
event = json.loads({event!r})
before = set(sys.modules)
start, start_cpu = time.perf_counter(), time.process_time()
import importlib
module = importlib.import_module({module!r})
{first_clients}
elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
new = sorted(set(sys.modules) - before)
import json
print(json.dumps({{"seconds": elapsed, "cpu_seconds": cpu, "modules": new}}))
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
    "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",  # never called: nothing here sends a request
}


@dataclass(frozen=True)
class Function:
    model: str  # its environment model in saga.settings
    environment: Mapping[str, str]


def function_environments() -> dict[str, Function]:
    """Each handler's environment as the stack renders it (its model, cdk.json's values, a
    stand-in name for each table and the queue)."""
    from saga.settings import TABLES, table_field
    from sagactl.config import cdk_config
    from stacks.constructs.agent_gateway import AGENT_TOOLS_SPEC
    from stacks.constructs.tools import TOOL_SPECS

    config = cdk_config()
    values = {
        "powertools_metrics_namespace": "ReplacementOrderSaga-bench",
        "powertools_log_level": config.functions.log_level,
        "attempt_budget": config.ledger.attempt_budget,
        "retention_seconds": config.ledger.retention_seconds,
        "lease_margin_seconds": config.ledger.lease_margin_seconds,
        "payment_key_retention_seconds": config.payment_key_retention_hours * 3600,
        "downstream_timeout_seconds": config.downstream_timeout_seconds,
        "tenants": config.tenants,
        "approval_keys": {
            tenant: {
                approver: {"current": f"arn:aws:kms:us-east-1:123456789012:key/bench-{approver}"}
                for approver in approvers
            }
            for tenant, approvers in config.tenants.items()
        },
        "approval_thresholds": config.approval_thresholds,
        "refund_ceilings": config.refund_ceilings,
        "escalation_queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
        "stuck_grace_seconds": config.monitoring.stuck_grace_seconds,
        "sweep_every_seconds": config.monitoring.sweep_every_minutes * 60,
        "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:bench",
        "agent_targets": {f"{tenant}-replacements": tenant for tenant in config.tenants},
        **{table_field(t): f"bench-{t}" for t in TABLES},
    }
    functions = {
        spec.handler.split(".")[-2]: Function(
            spec.environment.__name__,
            spec.environment.render({**values, "powertools_service_name": spec.service}),
        )
        for spec in (*TOOL_SPECS, AGENT_TOOLS_SPEC)
    }
    (refund,) = [spec for spec in TOOL_SPECS if spec.construct_id == "IssueRefundFunction"]
    stripe = {"payments_provider": "stripe", "stripe_secret": "bench/stripe-api-key"}
    sandbox_tables = {table_field(a.table): None for a in refund.access if a.sandbox_payments}
    functions[STRIPE_REFUND] = Function(
        refund.environment.__name__,
        refund.environment.render(
            {**values, **stripe, **sandbox_tables, "powertools_service_name": refund.service}
        ),
    )
    return functions


@dataclass(frozen=True)
class ColdStart:
    subject: str  # "bare" or the handler module
    modules: int
    xray_imported: bool
    median_ms: float  # wall time
    cpu_ms: float  # CPU time
    ratio: float  # median of handler / bare wall time over adjacent pairs (1.0 for bare)
    cpu_ratio: float  # the same for CPU time


@dataclass(frozen=True)
class ColdStartRun:
    seconds: float  # wall time of the timed part
    cpu_seconds: float  # CPU time of the same part: what it costs, without waiting for a core
    modules: frozenset[str]  # imported by the timed part

    @property
    def xray(self) -> bool:
        return any(m.split(".")[0] == "aws_xray_sdk" for m in self.modules)


@dataclass(frozen=True)
class CodeDirs:
    """Where a handler's code is imported from instead of the checkout (saga_bench/deployed.py):
    the function's code and the layer's packages, as Lambda mounts them (read-only: no bytecode
    is written)."""

    task: Path
    opt: Path


def child_environment(
    subject: str, function: Function | None, code: CodeDirs | None = None
) -> dict[str, str]:
    """The subject's fresh interpreter's environment: Lambda's runtime part, the function's own,
    fake credentials, no developer configuration."""
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "SYSTEMROOT"}}
    own = function.environment if function is not None else {}
    env = {**keep, **LAMBDA_RUNTIME_ENVIRONMENT, **own}
    if code is not None and subject != BARE:
        env["PYTHONPATH"] = f"{code.task}{os.pathsep}{code.opt}"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["AWS_LAMBDA_FUNCTION_NAME"] = f"bench-{subject}"
    env["_HANDLER"] = f"{_module(subject)}.handler"
    # Nothing may reach a real account or read a developer's configuration.
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


def _module(subject: str) -> str:
    return (
        "bare_handler" if subject == BARE else f"saga.handlers.{subject.split('+', maxsplit=1)[0]}"
    )


def _label(subject: str) -> str:
    """The subject as the report names it: the handler's module, and a variant's name."""
    handler, _, variant = subject.partition("+")
    return _module(handler) + (f" ({variant})" if variant else "")


def child_code(subject: str, function: Function | None) -> str:
    if function is None:
        first = BARE_FIRST_CLIENT
    else:
        first = FIRST_CLIENTS[subject].replace("{model!r}", repr(function.model))
        first += _END_OF_FIRST_INVOCATION
    event = json.dumps(first_event(subject))
    return _CHILD.format(
        module=_module(subject), first_clients=first, event=event, not_in_layer=NOT_IN_LAYER
    )


def first_event(subject: str) -> dict[str, object]:
    """The event of the subject's first invocation: the example case, approved, as the state
    machine passes it (the sweeper's scheduled event carries nothing it reads)."""
    if subject in (BARE, "sweep_stuck_actions"):
        return {}
    event: dict[str, object] = {
        "case": json.loads(EXAMPLE_CASE.read_text(encoding="utf-8")),
        "attempt": {**_ATTEMPT, "retry": 0},
    }
    if subject == "reconcile_action":
        event["step"] = "refund"
    if subject == "record_outcome":
        event["outcome"] = "COMPLETED"
    return event


def run_cold_start(
    subject: str, bare_dir: Path, function: Function | None, code: CodeDirs | None = None
) -> ColdStartRun:
    """One fresh interpreter: the subject's import and first clients (from `code` if given)."""
    cwd = bare_dir if subject == BARE else (LAMBDAS_DIR if code is None else code.task)
    done = subprocess.run(
        [sys.executable, "-c", child_code(subject, function)],
        cwd=cwd,
        env=child_environment(subject, function, code),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cold start of {subject} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return ColdStartRun(
        float(result["seconds"]), float(result["cpu_seconds"]), frozenset(result["modules"])
    )


@contextmanager
def bare_handler_dir() -> Iterator[Path]:
    """A directory with the bare handler module, its bytecode written (as saga's is)."""
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        bare_dir = Path(tmp)
        (bare_dir / "bare_handler.py").write_text(BARE_HANDLER, encoding="utf-8")
        run_cold_start(BARE, bare_dir, None)
        yield bare_dir


def measure_cold_starts(
    runs: int, subjects: tuple[str, ...] = SUBJECTS, code: CodeDirs | None = None
) -> list[ColdStart]:
    """`runs` rounds; in each, every handler runs right after a bare handler of its own, and its
    ratios for that round are the pair's quotients. Each figure is the median over rounds."""
    functions = function_environments()
    pairs: dict[str, list[tuple[ColdStartRun, ColdStartRun]]] = {s: [] for s in subjects}
    with bare_handler_dir() as bare_dir:
        for _ in range(runs):
            for subject in subjects:
                baseline = run_cold_start(BARE, bare_dir, None)
                pairs[subject].append(
                    (baseline, run_cold_start(subject, bare_dir, functions[subject], code))
                )
    bare = [b for runs_ in pairs.values() for b, _ in runs_]
    results = [_summary(BARE, bare, [(b, b) for b in bare])]
    results += [_summary(s, [r for _, r in pairs[s]], pairs[s]) for s in subjects]
    return results


def _summary(
    subject: str, runs: list[ColdStartRun], pairs: list[tuple[ColdStartRun, ColdStartRun]]
) -> ColdStart:
    def median(values: Iterable[float]) -> float:
        return statistics.median(values)

    return ColdStart(
        subject=BARE if subject == BARE else _label(subject),
        modules=max(len(r.modules) for r in runs),
        xray_imported=any(r.xray for r in runs),
        median_ms=round(median(r.seconds for r in runs) * 1000, 1),
        cpu_ms=round(median(r.cpu_seconds for r in runs) * 1000, 1),
        ratio=round(median(r.seconds / b.seconds for b, r in pairs), 2),
        cpu_ratio=round(median(r.cpu_seconds / b.cpu_seconds for b, r in pairs), 2),
    )


def format_cold_starts(results: list[ColdStart], runs: int) -> str:
    lines = [
        f"cold start: import + first clients; medians of {runs} rounds, each handler paired with",
        "a bare boto3 handler run just before it; x bare = median of the pairs' quotients",
        f"{'handler':<36} {'modules':>7} {'X-Ray':>5} {'wall ms':>8} {'x bare':>6} "
        f"{'cpu ms':>7} {'x bare':>6}",
    ]
    for r in results:
        lines.append(
            f"{r.subject:<36} {r.modules:>7} {'yes' if r.xray_imported else 'no':>5} "
            f"{r.median_ms:>8.1f} {r.ratio:>6.2f} {r.cpu_ms:>7.1f} {r.cpu_ratio:>6.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m saga_bench.coldstart", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=9, help="rounds (fresh interpreters each)")
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
