"""What a handler's cold start imports, counted (never timed) in a fresh interpreter each, the
way `make bench` measures it (saga_bench/coldstart.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from saga_bench.coldstart import (
    BARE,
    HANDLERS,
    LAMBDAS_DIR,
    STRIPE_REFUND,
    ColdStartRun,
    Function,
    bare_handler_dir,
    child_code,
    child_environment,
    function_environments,
    run_cold_start,
)
from saga_bench.deployed import deployed_layout

# What the bare boto3 handler imports is the baseline; a handler's import plus its first
# clients adds pydantic (and its models), Powertools' Logger and Metrics, and the saga package:
# 129 modules beyond the baseline when this was written, 141 for the refund's reconciler since
# the sandbox's payment keys have a module of their own, 146 for the refund and its reconciler
# since the daily refund ceiling has two (saga.ceilings, saga.ledger.charges). The bound leaves
# room for a module or two, not for another SDK (pydantic alone is about 40 modules, Powertools'
# tracer 60).
EXTRA_MODULES_BOUND = 148
# Heavy packages no handler needs at cold start: the X-Ray SDK (Lambda active tracing traces
# the functions) and Powertools' parser package (it builds a model for every event source).
NOT_IMPORTED = ("aws_xray_sdk", "wrapt", "aws_lambda_powertools.utilities.parser")


@pytest.fixture(scope="module")
def bare_dir() -> Iterator[Path]:
    with bare_handler_dir() as path:
        yield path


@pytest.fixture(scope="module")
def functions() -> dict[str, Function]:
    return function_environments()


@pytest.fixture(scope="module")
def bare(bare_dir: Path) -> ColdStartRun:
    return run_cold_start(BARE, bare_dir, None)


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_cold_start_imports_no_tracing_sdk_and_a_bounded_number_of_modules(
    handler: str, bare_dir: Path, functions: dict[str, Function], bare: ColdStartRun
) -> None:
    run = run_cold_start(handler, bare_dir, functions[handler])
    heavy = sorted(m for m in run.modules if m.startswith(NOT_IMPORTED))
    assert heavy == []
    assert "boto3" in run.modules and "pydantic" in run.modules  # it did import the handler
    extra = run.modules - bare.modules
    assert len(extra) <= EXTRA_MODULES_BOUND, sorted(extra)


# Every botocore data file a cold start opens, by an audit hook installed before the import.
_AUDIT_OPENS = """
import sys
_opened = []
def _audit(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".json"):
        _opened.append(args[0])
sys.addaudithook(_audit)
"""


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_cold_start_reads_only_the_packages_reduced_botocore_data(
    handler: str, functions: dict[str, Function]
) -> None:
    """saga.aws: every client of the Lambda code reads botocore_models/, never botocore's own
    data (its ~400 service directories listed, its 1.2 MB endpoints.json parsed)."""
    code = _AUDIT_OPENS + child_code(handler, functions[handler])
    code += "\nprint(json.dumps(sorted(set(_opened))))\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=LAMBDAS_DIR,
        env=child_environment(handler, functions[handler]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    opened = json.loads(done.stdout.strip().splitlines()[-1])
    trimmed = str(LAMBDAS_DIR / "saga" / "botocore_models")
    botocore_data = [path for path in opened if "botocore_models" not in path]
    assert botocore_data == []
    assert any(path.startswith(trimmed) and path.endswith("endpoints.json") for path in opened)


_PROBE = """
import gc
frozen_at_start = gc.get_freeze_count()  # 3.12 starts with a few hundred of its own objects
import saga.handlers.record_outcome as module
paused = not gc.isenabled()

class Context:
    function_name, memory_limit_in_mb, aws_request_id = "probe", 128, "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:probe"

try:
    module.handler({}, Context())
except Exception as exc:
    refused = type(exc).__name__
print(paused, gc.isenabled(), gc.get_freeze_count() > frozen_at_start, refused)
"""


@pytest.mark.parametrize(
    ("runtime_api", "expected"),
    [
        ("127.0.0.1:9001", "True True True InvalidRequest"),  # paused, resumed, frozen
        (None, "False True False InvalidRequest"),  # pytest, the local AWS: untouched
    ],
)
def test_the_collector_pauses_for_a_lambda_cold_start_and_resumes_at_the_first_invocation(
    functions: dict[str, Function], runtime_api: str | None, expected: str
) -> None:
    env = {
        **os.environ,
        **functions["record_outcome"].environment,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env.pop("AWS_LAMBDA_RUNTIME_API", None)
    if runtime_api:
        env["AWS_LAMBDA_RUNTIME_API"] = runtime_api
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=LAMBDAS_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize("bytecode", [False, True])
def test_the_deployed_layout_imports_the_handler_from_its_own_code_and_layer(
    bytecode: bool, bare_dir: Path, functions: dict[str, Function]
) -> None:
    """saga_bench/deployed.py: the handler and the layer's packages come from the layout
    (no bytecode found beside them, or bytecode as the assets ship it), nothing is written."""
    with deployed_layout(bytecode=bytecode) as code:
        run = run_cold_start("issue_refund", bare_dir, functions["issue_refund"], code)
        tag = sys.implementation.cache_tag
        pycs = {p.name for d in (code.task, code.opt) for p in d.rglob("*.pyc")}
        assert (f"issue_refund.{tag}.pyc" in pycs) is bytecode
        assert (f"main.{tag}.pyc" in pycs) is bytecode  # pydantic's, from the layer
        assert (code.opt / "pydantic" / "main.py").is_symlink()
    assert "saga.handlers.issue_refund" in run.modules


def test_only_the_stripe_deployments_refund_imports_the_stripe_sdk(
    bare_dir: Path, functions: dict[str, Function]
) -> None:
    """The SDK is imported by the function that calls Stripe, and only with payments=stripe;
    the report measures that variant beside the sandbox's (`make bench`)."""
    stripe = run_cold_start(STRIPE_REFUND, bare_dir, functions[STRIPE_REFUND])
    sandbox = run_cold_start("issue_refund", bare_dir, functions["issue_refund"])

    assert "stripe" in stripe.modules and "saga.providers.stripe_provider" in stripe.modules
    assert not any(m.split(".")[0] == "stripe" for m in sandbox.modules)
    assert not any(m.startswith("saga.providers") for m in sandbox.modules)
    assert functions[STRIPE_REFUND].environment["PAYMENTS_PROVIDER"] == "stripe"
    assert "PAYMENTS_TABLE" not in functions[STRIPE_REFUND].environment
