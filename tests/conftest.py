"""Shared fixtures: fake credentials everywhere, and the local AWS started once per session.

- `local_server`: one moto server in this process on a free loopback port, hooks installed
  (Step Functions execution, JSONata, in-process Lambda handlers, atomic DynamoDB requests).
  Retry sleeps are scaled by $SAGA_LOCAL_TIME_SCALE (default 0.1 in tests).
- `synthesized`: the real CDK app synthesized once (infrastructure assertions use it too).
- `stack_tables`: its DynamoDB tables, for the moto-backed tests to create under their own
  names (tests/tables.py).
- `local_aws`: the real stack (that template) freshly provisioned for each test
  (reset + provision: ~0.1 s), sandbox inventory seeded, AWS_ENDPOINT_URL set for the test.
  Its clock starts at real time: `local_aws.clock.advance(seconds)` moves the one clock the
  handlers, Step Functions timestamps, TTL deletion and the token window read; the offset is
  dropped again after the test, so no later test inherits it.
- `fixture_local_aws`: the same for the small hand-written template in
  tests/e2e/local_stack_fixture.py (tests of the emulator itself).
- `stripe_aws`: the same for the app synthesized with payments=stripe, its refunds going to one
  local Stripe server per session (local_aws.stripe), emptied and wired for each test as
  `sagactl local up --payments stripe` wires it.

The server shares moto's in-process state with `mock_aws`: a `mock_aws` test wipes it, which is
why every test that uses the local AWS gets a fresh provisioning. It shares moto's code too, so
DynamoDB's rules that the local AWS enforces (atomic requests, the ClientRequestToken contract,
request validation, TTL deletion when the clock is advanced) are installed for the whole session
(`dynamodb_as_on_aws`): every test sees the same DynamoDB, whatever ran before it.

`make test` runs the suite in pytest-xdist workers (`-n 2`), each a session of its own: its own
server (ephemeral port, moto state, Lambda worker processes, clock file), its own synth and
temporary directories (`tmp_path_factory` is per worker). The workers share only read-only
project files and the layer cache (`.build/`, filled by an atomic rename:
stacks/layer_bundling.py); the only test that writes into the checkout is the README's
(tests/cli/test_readme_commands.py: its case files under `.local/`, as the README's commands
do), and no other reads them. A test that holds a fixed port or counts the whole machine's
processes would need an `xdist_group` (and `--dist loadgroup`); none does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sagactl.paths import with_pinned_node

# The pinned Node.js (package.json) for everything the tests run on Node: the CDK's jsii kernel
# (it starts when aws_cdk is first imported, below), the reference JSONata, the ASL validator.
os.environ["PATH"] = with_pinned_node(os.environ)["PATH"]

from local_aws.clock import LOCAL_CLOCK, LocalClock
from local_aws.emulator import (
    LocalServer,
    client_environment,
    install_dynamodb_atomicity,
    install_dynamodb_validation,
    install_transaction_tokens,
    install_ttl_deletion,
)
from local_aws.environment import LocalAws, StackSource
from local_aws.lambda_runtime import handlers_in_process
from local_aws.stripe.server import LocalStripe
from local_aws.tables import StackTables
from local_aws.template import load_template
from tests.infra.synth import Synthesized, synthesize

FAKE_AWS_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
# Anything that could point a client at a real account or a real endpoint.
_REAL_AWS_VARIABLES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
TEST_TIME_SCALE_DEFAULT = "0.1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `runs_first` tests (minutes each, in processes of their own) first, the rest in
    their order: `make test`'s first worker starts with them while the other takes the rest,
    instead of one of them starting last and running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("runs_first") is None)


@pytest.fixture(scope="session", autouse=True)
def fake_aws_credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials and region for the whole session; no profile, no real endpoint."""
    empty = tmp_path_factory.mktemp("aws-config") / "none"
    empty.write_text("", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        for name in _REAL_AWS_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in FAKE_AWS_ENVIRONMENT.items():
            patch.setenv(name, value)
        patch.setenv("AWS_CONFIG_FILE", str(empty))
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
        yield


@pytest.fixture(scope="session", autouse=True)
def dynamodb_as_on_aws() -> None:
    """moto's DynamoDB, in `mock_aws` and in the local AWS alike, with the rules the local AWS
    adds: atomic requests, the ClientRequestToken contract, DynamoDB's request validation and
    TTL deletion (on the local clock)."""
    install_dynamodb_atomicity()
    install_transaction_tokens()
    install_dynamodb_validation()
    install_ttl_deletion()


@pytest.fixture
def local_clock() -> Iterator[LocalClock]:
    """The local AWS's clock (also the token window's in `mock_aws`), back at real time after."""
    yield LOCAL_CLOCK
    LOCAL_CLOCK.reset()


@pytest.fixture(scope="session")
def local_server(fake_aws_credentials: None) -> Iterator[LocalServer]:
    scale = float(os.environ.get("SAGA_LOCAL_TIME_SCALE", TEST_TIME_SCALE_DEFAULT))
    server = LocalServer(port=0, time_scale=scale)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The real CDK app (build_app, as app.py runs it), synthesized once per session with the
    real, cached layer bundling: the infrastructure assertions and the local AWS share it."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def stack_tables(synthesized: Synthesized) -> StackTables:
    """The real stack's tables as its template declares them: the moto-backed tests create
    theirs from it (tests/tables.py), never from a schema of their own."""
    return StackTables.from_template(synthesized.template_json)


@pytest.fixture(scope="session")
def saga_stack_source(synthesized: Synthesized) -> StackSource:
    """The real stack's template, as the local AWS provisions it."""
    return StackSource(load_template(synthesized.template_path), synthesized.saga.stack.stack_name)


@pytest.fixture(scope="session")
def _saga_local(local_server: LocalServer, saga_stack_source: StackSource) -> LocalAws:
    return LocalAws(server=local_server, source=saga_stack_source)


@pytest.fixture
def local_aws(_saga_local: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalAws]:
    """The real stack in a fresh local account; `run_case(case)` runs one execution."""
    _saga_local.reprovision()
    for name, value in client_environment(_saga_local.endpoint).items():
        monkeypatch.setenv(name, value)
    yield _saga_local
    _saga_local.clock.reset()  # saga.clock stays installed in this process: back to real time


@pytest.fixture(scope="session")
def synthesized_stripe(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The CDK app with refunds through Stripe, as `sagactl local up --payments stripe`
    synthesizes it (local_aws.stripe.wiring.stripe_context)."""
    from local_aws.stripe.wiring import stripe_context

    return synthesize(tmp_path_factory.mktemp("stripe-cdk.out"), stripe_context())


@pytest.fixture(scope="session")
def local_stripe_server(fake_aws_credentials: None) -> Iterator[LocalStripe]:
    """One local Stripe server per session (a free loopback port), emptied for each test."""
    with LocalStripe(port=0) as stripe:
        yield stripe


@pytest.fixture(scope="session")
def _stripe_local(local_server: LocalServer, synthesized_stripe: Synthesized) -> LocalAws:
    source = StackSource(
        load_template(synthesized_stripe.template_path),
        synthesized_stripe.saga.stack.stack_name,
    )
    return LocalAws(server=local_server, source=source)


@dataclass(frozen=True)
class StripeAws:
    """The stack with payments=stripe in a fresh local account, and its local Stripe server."""

    local: LocalAws
    stripe: LocalStripe


@pytest.fixture
def stripe_aws(
    _stripe_local: LocalAws, local_stripe_server: LocalStripe, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StripeAws]:
    """As `local_aws`, with refunds going to the local Stripe server (wired as `sagactl local up
    --payments stripe` wires it: local_aws.stripe.wiring.attach). After the test, the
    server must have sent no answer Stripe's description refuses."""
    from local_aws.stripe.wiring import attach

    _stripe_local.reprovision()
    attach(_stripe_local, local_stripe_server)
    for name, value in client_environment(_stripe_local.endpoint).items():
        monkeypatch.setenv(name, value)
    yield StripeAws(_stripe_local, local_stripe_server)
    _stripe_local.clock.reset()
    assert local_stripe_server.problems == []


@pytest.fixture
def handlers_in_this_process() -> Iterator[None]:
    """The local AWS runs handlers in the test's process, one at a time, for the test: a test
    that patches handler code (a worker process would not see the patch)."""
    with handlers_in_process():
        yield


@pytest.fixture(scope="session")
def _fixture_local(local_server: LocalServer) -> LocalAws:
    from tests.e2e.local_stack_fixture import TEMPLATE

    return LocalAws(server=local_server, source=StackSource(TEMPLATE, "fx", asl_path=None))


@pytest.fixture
def fixture_local_aws(
    _fixture_local: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalAws]:
    """The hand-written fixture stack in a fresh local account (clock as for `local_aws`)."""
    _fixture_local.reprovision()
    for name, value in client_environment(_fixture_local.endpoint).items():
        monkeypatch.setenv(name, value)
    yield _fixture_local
    _fixture_local.clock.reset()
