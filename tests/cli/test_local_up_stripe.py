"""`sagactl local up --payments stripe` as a user runs it: a separate process serving the local AWS
and a local Stripe server, the stack's refunds wired to it, the Stripe examples run with
`sagactl start`, and the refunds counted on the server."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from local_aws.stripe import server, wiring
from sagactl.cli import build_parser
from sagactl.commands import local as local_command
from tests.cli.sagactl_helpers import EXAMPLES
from tests.cli.test_local_up import _free_port, _local_up_args, _run_sagactl, _sagactl, _wait_for
from tests.infra.synth import Synthesized

STRIPE_EXAMPLES = EXAMPLES / "stripe"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:  # a loopback URL
        return json.loads(answer.read())


def test_up_with_stripe_serves_the_refunds_and_the_examples_run(
    synthesized_stripe: Synthesized, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    port, stripe_port = _free_port(), _free_port()
    args = _local_up_args(state, synthesized_stripe.template_path, port, "--time-scale", "0.1")
    up = subprocess.Popen(
        _sagactl(*args, "--payments", "stripe", "--stripe-port", str(stripe_port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(state / "local.pid", up)
        outputs = json.loads((state / "outputs.json").read_text(encoding="utf-8"))
        env_file = (state / "env").read_text(encoding="utf-8")
        env = {
            "PATH": str(Path(_sagactl()[0]).parent),
            "AWS_ENDPOINT_URL": outputs["Endpoint"],
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "SAGA_LOCAL_OUTPUTS": str(state / "outputs.json"),
        }
        runs = {
            name: subprocess.run(
                _sagactl("start", str(STRIPE_EXAMPLES / f"{name}.json"), "--watch"),
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
                env=env,
            )
            for name in ("happy-path", "refund-in-flight", "refund-disputed")
        }
        refunds = _get(f"{outputs['StripeApiBase']}/_local/refunds")["data"]
        problems = _get(f"{outputs['StripeApiBase']}/_local/problems")["problems"]
        down = _run_sagactl("local", "--state-dir", str(state), "down")
        _, stderr = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()

    assert outputs["StripeApiBase"] == f"http://127.0.0.1:{stripe_port}"
    assert "PaymentsTableName" not in outputs  # no refund lands in the sandbox's table
    # the refund is Stripe's: the sandbox's refunds are not counted as if none were made
    assert "  refunds     not deployed" in runs["happy-path"].stdout
    assert f"export StripeApiBase=http://127.0.0.1:{stripe_port}" in env_file
    for name, run in runs.items():
        expected = "ESCALATED" if name == "refund-disputed" else "COMPLETED"
        assert f"outcome: {expected}" in run.stdout, run.stdout + run.stderr
    assert "charged back" in runs["refund-disputed"].stdout
    # One refund per completed case, at the payment its case names; none for the disputed one.
    assert sorted((r["metadata"]["case_id"], r["payment_intent"]) for r in refunds) == [
        ("case-stripe-happy-path", "pi_local_happy_path"),
        ("case-stripe-refund-in-flight", "pi_local_refund_in_flight"),
    ]
    assert problems == []
    assert down.returncode == 0, down.stderr
    assert (
        f"local Stripe on http://127.0.0.1:{stripe_port} (API version 2026-10-28.endive, its "
        f"key in secret saga-local/stripe-api-key): {len(wiring.SEEDED_PAYMENTS)} test payments"
    ) in stderr
    assert "then, for example: sagactl start examples/stripe/happy-path.json" in stderr


@pytest.mark.parametrize(
    ("payments", "message"),
    [
        ("stripe", "sends its refunds to the sandbox: synthesize it with `-c payments=stripe`"),
        ("sandbox", "sends its refunds to Stripe: start it with `sagactl local up --payments"),
    ],
)
def test_up_refuses_a_stack_whose_payments_are_not_the_ones_asked_for(
    synthesized: Synthesized,
    synthesized_stripe: Synthesized,
    tmp_path: Path,
    payments: str,
    message: str,
) -> None:
    template = synthesized if payments == "stripe" else synthesized_stripe
    args = _local_up_args(tmp_path / "state", template.template_path, _free_port())
    refused = subprocess.run(
        _sagactl(*args, "--payments", payments, "--stripe-port", str(_free_port())),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert refused.returncode == 1, refused.stderr
    assert message in refused.stderr.splitlines()[-1]
    assert not (tmp_path / "state" / "local.pid").exists()


def test_up_with_stripe_on_a_busy_port_fails_at_once_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        args = _local_up_args(tmp_path / "state", tmp_path / "no-template.json", _free_port())
        refused = subprocess.run(
            _sagactl(*args, "--payments", "stripe", "--stripe-port", str(taken)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"sagactl local: cannot listen on 127.0.0.1:{taken}: Address already in use (another "
        "program holds the port: stop it, or pass --stripe-port)"
    )


def test_the_up_flags_name_the_local_stripe_servers_own_defaults() -> None:
    args = build_parser().parse_args(["local", "up"])
    assert (args.payments, args.stripe_port) == ("sandbox", server.DEFAULT_PORT)
    assert local_command.STRIPE_SECRET_NAME == wiring.LOCAL_SECRET_NAME
