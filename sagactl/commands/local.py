"""`sagactl local up|down|env`: the local AWS (moto on loopback) with the stack provisioned, and
the environment a client shell needs to use it;
`sagactl local advance|clock`: move and read its clock (commands/local_clock.py);
`sagactl local demo` (commands/demo.py).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from local_aws.emulator import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    sweep_ttl_until,
    time_scale_from_env,
)
from local_aws.lambda_errors import CrashNaming, crash_naming_from_env
from local_aws.lambda_pool import (
    CONCURRENCY_ENV,
    DEFAULT_ACCOUNT_CONCURRENCY,
    account_concurrency_from_env,
)
from sagactl.commands import summary
from sagactl.commands.common import add_command
from sagactl.commands.demo import register_demo
from sagactl.commands.local_clock import register_clock
from sagactl.commands.local_common import (
    LocalCommandError,
    _non_negative_float,
    _positive_int,
    deleted_text,
    guarded_local,
)
from sagactl.local_process import (
    env_file,
    is_local_server,
    pid_file,
    process_alive,
    read_pid_file,
    remove_own_pid_file,
    running_local_server,
    stop_local_server,
    write_env_file,
    write_pid_file,
)
from sagactl.paths import LOCAL_STATE_DIR, display_path
from sagactl.target import OUTPUTS_ENV

logger = logging.getLogger("sagactl.local")

DEFAULT_STATE_DIR = LOCAL_STATE_DIR
LOST_STATE = (
    "every table, queue, key, function and execution of it is gone (the local AWS keeps them in "
    "memory): the next `sagactl local up` starts from an empty account"
)
OUTPUTS_FILE_NAME = "outputs.json"
HANDLER_LOG_NAME = "handlers.log"
DEFAULT_TTL_SWEEP_SECONDS = 60.0
SANDBOX, STRIPE = "sandbox", "stripe"
# local_aws.stripe's defaults, repeated so that `--help` imports none of it.
DEFAULT_STRIPE_PORT = 12111
STRIPE_SECRET_NAME = "saga-local/stripe-api-key"  # noqa: S105 (the secret's name, not a key)
T = TypeVar("T")


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("werkzeug", "botocore", "boto3", "urllib3", "moto"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not verbose:
        # moto logs every failed execution as one multi-kilobyte dump of the parsed state; the
        # failure itself is in describe-execution / `sagactl status`.
        logging.getLogger("moto").setLevel(logging.CRITICAL)


def _stack_source(args: argparse.Namespace) -> Any:
    from local_aws.environment import StackSource

    if args.template is not None:
        return StackSource.from_file(args.template, args.stack_name)
    if args.cloud_assembly is not None:
        return StackSource.from_cloud_assembly(args.cloud_assembly, args.stack_name)
    outdir = args.state_dir / "cdk.out"
    context = None
    if args.payments == STRIPE:
        from local_aws.stripe.wiring import stripe_context

        context = stripe_context()
    started = time.perf_counter()
    with_context = (
        f" with -c payments=stripe -c stripe_secret={context['stripe_secret']} (and each "
        "four-eyes approver's own principal)"
        if context
        else ""
    )
    print(f"synthesizing the CDK app into {outdir}{with_context} ...", file=sys.stderr)
    source = StackSource.synthesized(outdir, args.stack_name, context)
    print(
        f"synthesized {source.stack_name} in {time.perf_counter() - started:.1f}s", file=sys.stderr
    )
    return source


def _listen_error(host: str, port: int, exc: OSError, *, flag: str = "--port") -> LocalCommandError:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        reason += f" (another program holds the port: stop it, or pass {flag})"
    return LocalCommandError(f"cannot listen on {host}:{port}: {reason}")


def _or_from_env(given: T | None, from_env: Callable[[], T]) -> T:
    """The option's value, else its environment variable's, which must be valid."""
    if given is not None:
        return given
    try:
        return from_env()
    except ValueError as exc:
        raise LocalCommandError(str(exc)) from None


def command_up(args: argparse.Namespace) -> int:
    from local_aws.emulator import LocalServer

    _configure_logging(args.verbose)
    state_dir: Path = args.state_dir
    running = running_local_server(state_dir)
    if running:
        raise LocalCommandError(
            f"a local AWS is already running (pid {running['pid']}, {running.get('endpoint')}); "
            "stop it with `sagactl local down`"
        )
    # The port first: a busy one is reported at once, before seconds of synthesis.
    server = LocalServer(
        args.host,
        args.port,
        time_scale=_or_from_env(args.time_scale, time_scale_from_env),
        run_schedules=True,
        crash_errors=_or_from_env(args.crash_errors, crash_naming_from_env),
        lambda_concurrency=_or_from_env(args.lambda_concurrency, account_concurrency_from_env),
    )
    started = time.perf_counter()
    try:
        server.start()
    except OSError as exc:
        raise _listen_error(args.host, args.port, exc) from None
    server_seconds = time.perf_counter() - started
    stripe = None
    try:
        if args.payments == STRIPE:
            stripe = _start_stripe(args)
        source = _stack_source(args)
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        _serve(args, server, source, stop, server_seconds, stripe=stripe)
    finally:
        if stripe is not None:
            stripe.stop()
        server.stop()
        remove_own_pid_file(state_dir)
    return 0


def _start_stripe(args: argparse.Namespace) -> Any:
    """The local Stripe server on its port (a busy one is reported before the synthesis)."""
    from local_aws.stripe.server import LocalStripe

    stripe = LocalStripe(args.host, args.stripe_port)
    try:
        stripe.start()
    except OSError as exc:
        raise _listen_error(args.host, args.stripe_port, exc, flag="--stripe-port") from None
    return stripe


def _attach_stripe(local: Any, stripe: Any) -> None:
    """Wire the provisioned stack to the local Stripe server, or say why it cannot be; without
    one, refuse a stack whose refunds go to Stripe (nothing would answer them)."""
    from local_aws.stripe.wiring import StripeNotDeployed, attach, stripe_functions

    if stripe is None:
        if stripe_functions(local):
            raise LocalCommandError(
                f"the stack {local.source.stack_name} sends its refunds to Stripe: start it "
                "with `sagactl local up --payments stripe`, which serves a local Stripe"
            )
        return
    try:
        attach(local, stripe)
    except StripeNotDeployed as exc:
        raise LocalCommandError(str(exc)) from None


def _serve(
    args: argparse.Namespace,
    server: Any,
    source: Any,
    stop: threading.Event,
    server_seconds: float,
    *,
    stripe: Any = None,
) -> None:
    """Provision the stack (wired to the local Stripe server with --payments stripe), say how
    to reach it, serve until `stop`. The handlers' own output (JSON log lines, metrics) goes to
    the handler log, not into this shell."""
    from local_aws.environment import LocalAws
    from local_aws.lambda_runtime import quiet_handlers

    state_dir: Path = args.state_dir
    handler_log = _handler_log(args)
    # Handlers print to stdout: keep them apart from this shell (`-` keeps them here).
    quiet = quiet_handlers(handler_log) if handler_log is not None else contextlib.nullcontext()
    with quiet:
        local = LocalAws(server=server, source=source, seed=args.seed)
        started = time.perf_counter()
        local.provision()
        _attach_stripe(local, stripe)
        provision_seconds = time.perf_counter() - started
        outputs_path = state_dir / OUTPUTS_FILE_NAME
        local.write_outputs(outputs_path)
        env_path = write_env_file(state_dir, client_environment_of(local, outputs_path))
        write_pid_file(state_dir, local.endpoint, server.port)
        provisioned = local.provisioned
        assert provisioned is not None
        print(
            f"local AWS on {local.endpoint} (server {server_seconds:.2f}s, provisioning "
            f"{provision_seconds:.2f}s): stack {source.stack_name}, {len(provisioned.tables)} "
            f"tables, {len(provisioned.queues)} queues, {len(provisioned.functions)} functions, "
            f"{len(provisioned.state_machines)} state machine(s), "
            f"{len(provisioned.rules)} EventBridge rule(s)",
            file=sys.stderr,
        )
        if stripe is not None:
            print(
                f"local Stripe on {stripe.url} (API version {stripe.description.api_version}, "
                f"its key in secret {STRIPE_SECRET_NAME}): {len(stripe.account.payments)} "
                "test payments, the ones examples/stripe/ refund",
                file=sys.stderr,
            )
        print(f"outputs: {display_path(outputs_path)}", file=sys.stderr)
        if handler_log is not None:
            print(f"handler logs: {display_path(handler_log)}", file=sys.stderr)
        print(
            f"in another shell: source {shlex.quote(display_path(env_path))}   "
            f'(or: eval "$({env_command(state_dir)})")',
            file=sys.stderr,
        )
        example = "examples/stripe/happy-path.json" if stripe else "examples/happy-path.json"
        print(f"then, for example: sagactl start {example}", file=sys.stderr)
        print("stop with Ctrl-C or `sagactl local down` (all local state is lost)", file=sys.stderr)
        sweep_ttl_until(
            stop,
            args.ttl_sweep_seconds,
            lambda deleted: logger.info("TTL deleted %s", deleted_text(deleted)),
        )
        print("stopping the local AWS", file=sys.stderr)


def env_command(state_dir: Path) -> str:
    """The `sagactl local env` that prints this state directory's environment."""
    if state_dir.resolve() == DEFAULT_STATE_DIR.resolve():
        return "sagactl local env"
    return f"sagactl local --state-dir {shlex.quote(display_path(state_dir))} env"


def client_environment_of(local: Any, outputs_path: Path) -> dict[str, str]:
    """What a client shell needs: fake credentials and the loopback endpoint, where the outputs
    are (so sagactl finds them from any directory), and each stack output under its own name
    (`$StateMachineArn`, `$LedgerTableName`, ...)."""
    outputs = {key: value for key, value in local.outputs.items() if key != "Endpoint"}
    return {**local.environment, OUTPUTS_ENV: str(outputs_path.resolve()), **outputs}


def _handler_log(args: argparse.Namespace) -> Path | None:
    """Where the handlers' output goes: --handler-log, default <state dir>/handlers.log; None
    (`--handler-log -`): into this shell."""
    if args.handler_log == "-":
        return None
    return Path(args.handler_log) if args.handler_log else args.state_dir / HANDLER_LOG_NAME


def command_down(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir
    record = read_pid_file(state_dir)
    if record is None:
        print("no local AWS is running", file=sys.stderr)
        return 0
    pid = int(record["pid"])
    if not process_alive(pid) or not is_local_server(pid):
        pid_file(state_dir).unlink(missing_ok=True)
        print(f"no local AWS is running (removed a stale pid file for pid {pid})", file=sys.stderr)
        return 0
    stop_local_server(state_dir, pid)
    print(f"stopped the local AWS (pid {pid}, {record.get('endpoint')}): {LOST_STATE}")
    return 0


def command_env(args: argparse.Namespace) -> int:
    """The running local AWS's environment file, for `eval "$(sagactl local env)"`."""
    state_dir: Path = args.state_dir
    running = running_local_server(state_dir)
    path = env_file(state_dir)
    if running is None or not path.exists():
        raise LocalCommandError(
            f"no local AWS is running (none in {display_path(state_dir)}): start one with "
            "`sagactl local up`"
        )
    sys.stdout.write(path.read_text(encoding="utf-8"))
    return 0


def _register_up(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = add_command(
        local,
        "up",
        "start the local AWS with the stack provisioned; stays up until interrupted",
        handler=command_up,
        guard=guarded_local,
        description="Start the local AWS (a moto server on loopback, nothing reaches real AWS), "
        "synthesize the CDK app and provision its stack into it (tables, queues, functions, the "
        "state machine, EventBridge rules; resources are named after the stack, as in the "
        "README), seed the sandbox inventory, write <state dir>/outputs.json and <state "
        "dir>/env (the `export` lines a client in another shell sources: `source .local/env` "
        'or `eval "$(sagactl local env)"`). The functions\' own output (JSON log '
        "lines, metrics) goes to <state dir>/handlers.log. Stops on Ctrl-C, SIGTERM or "
        "`sagactl local down`. A port that is already in use ends it at once (exit 1).",
    )
    up.add_argument("--port", type=int, default=DEFAULT_PORT, help="default %(default)s")
    up.add_argument("--host", default=DEFAULT_HOST, help="loopback address (default %(default)s)")
    up.add_argument(
        "--seed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="seed the sandbox inventory (default on)",
    )
    up.add_argument(
        "--template",
        type=Path,
        help="provision this synthesized template instead of synthesizing (the stack name, "
        "which prefixes every resource name, comes from cdk.out/manifest.json next to it, else "
        "from its file name <stack>.template.json; --stack-name overrides)",
    )
    up.add_argument(
        "--cloud-assembly", type=Path, help="provision from this cdk.out directory (no synthesis)"
    )
    up.add_argument(
        "--stack-name",
        help="the stack to provision when the cloud assembly has several; with --template, "
        "the name its resources get",
    )
    up.add_argument(
        "--handler-log",
        metavar="FILE",
        help="where the functions' output goes (default: <state dir>/handlers.log; `-`: this "
        "shell)",
    )
    up.add_argument(
        "--time-scale",
        type=_non_negative_float,
        default=None,
        help="scale Step Functions Retry sleeps (default: $SAGA_LOCAL_TIME_SCALE or 1)",
    )
    up.add_argument(
        "--ttl-sweep-seconds",
        type=_non_negative_float,
        default=DEFAULT_TTL_SWEEP_SECONDS,
        help="delete TTL-expired items this often (default %(default)s; 0: only when the "
        "clock is advanced)",
    )
    up.add_argument(
        "--crash-errors",
        type=CrashNaming,
        choices=list(CrashNaming),
        default=None,
        help="the error a function that died answers: current (Sandbox.Timedout, "
        "Runtime.ExitError, Runtime.OutOfMemory) or lambda-unknown (none: Lambda.Unknown, what "
        "Step Functions' guide documents); default: $SAGA_LOCAL_CRASH_ERRORS, else current",
    )
    up.add_argument(
        "--lambda-concurrency",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Lambda invocations in flight at once in the account (each runs in a process of "
        "its own; past it Invoke answers TooManyRequestsException, as Lambda does past its "
        f"quota; a function's reserved concurrency still applies); default: ${CONCURRENCY_ENV}, "
        f"else {DEFAULT_ACCOUNT_CONCURRENCY}",
    )
    up.add_argument(
        "--payments",
        choices=(SANDBOX, STRIPE),
        default=SANDBOX,
        help="where refunds go: the sandbox's provider (default), or Stripe: synthesize with "
        "-c payments=stripe and serve a local Stripe server (local_aws/stripe) the refunds "
        "go to, with test payments for examples/stripe/ and the cases' refund faults acted out",
    )
    up.add_argument(
        "--stripe-port",
        type=int,
        default=DEFAULT_STRIPE_PORT,
        help="with --payments stripe: the local Stripe server's port (default %(default)s)",
    )
    up.add_argument("--verbose", action="store_true", help="debug logging")


def _register_down(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        local,
        "down",
        "stop a running `sagactl local up`",
        handler=command_down,
        guard=guarded_local,
        description="Stop the `sagactl local up` whose pid file is in the state directory "
        f"(SIGTERM, then wait for it to exit): {LOST_STATE}. With nothing running it says so "
        "and exits 0.",
    )


def _register_env(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        local,
        "env",
        "print the environment of the running local AWS, for eval",
        handler=command_env,
        guard=guarded_local,
        description="Print the `export` lines of the running `sagactl local up` (the file "
        "<state dir>/env it wrote): fake credentials, the loopback endpoint, where its outputs "
        'are, and one variable per stack output. `eval "$(sagactl local env)"` sets them in '
        "this shell (as `source .local/env` does). Exit 1 when no local AWS is running.",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    local = add_command(
        subparsers,
        "local",
        summary("local"),
        description="Run the whole stack on this machine, with no AWS account: `up` starts the "
        "local AWS and provisions the synthesized stack, `down` stops it, `env` prints what a "
        "client shell needs to use it, `advance` and `clock` "
        "move and read its clock, `demo` runs the saga's scenarios against a throwaway one.",
    )
    local.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="where outputs.json, the pid file and the handler log live (default %(default)s)",
    )
    local_commands = local.add_subparsers(dest="local_command", metavar="SUBCOMMAND", required=True)
    for add in (_register_up, _register_down, _register_env, register_clock, register_demo):
        add(local_commands)
