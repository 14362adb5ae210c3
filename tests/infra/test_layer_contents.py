"""The dependencies layer holds exactly lambdas/requirements.txt, a lock installed without
dependency resolution (`pip install --no-deps`): each listed distribution at its version, none
unlisted, and every distribution's own requirements met inside the layer, except the ones
left out on purpose (stacks/layer_lock.py: the Stripe SDK's `requests`)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from stacks.layer_bundling import build_cached_layer
from stacks.layer_lock import LEFT_OUT_OF_LAYER
from stacks.saga_stack import DEFAULT_BUILD_CACHE, PROJECT_ROOT
from tests.infra.synth import Synthesized

REQUIREMENTS = PROJECT_ROOT / "lambdas" / "requirements.txt"
# The functions' runtime, for the requirements' environment markers.
LAMBDA_MARKERS = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "aarch64"}


def _locked() -> dict[str, str]:
    pinned: dict[str, str] = {}
    for text in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        line = text.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", f"{line}: a lock pins each version with =="
            pinned[canonicalize_name(requirement.name)] = specifier.version
    return pinned


def _installed(layer: Path) -> dict[str, Distribution]:
    return {
        canonicalize_name(d.metadata["Name"]): d
        for d in distributions(path=[str(layer / "python")])
    }


def test_the_layer_holds_the_lock_and_every_requirement_but_those_left_out(
    synthesized: Synthesized,
) -> None:
    layer = build_cached_layer(REQUIREMENTS, DEFAULT_BUILD_CACHE)  # synth has built it
    installed = _installed(layer)
    assert {name: d.version for name, d in installed.items()} == _locked()

    unmet = set()
    for name, dist in installed.items():
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate(
                {**LAMBDA_MARKERS, "extra": ""}
            ):
                continue
            needed = canonicalize_name(requirement.name)
            found = installed.get(needed)
            if found is None or not requirement.specifier.contains(found.version, prereleases=True):
                unmet.add((name, needed))
    assert unmet == {(canonicalize_name(a), canonicalize_name(b)) for a, b in LEFT_OUT_OF_LAYER}


def test_a_stripe_refund_works_without_requests() -> None:
    """What leaving `requests` out relies on: the SDK imports it only to choose a default
    client, and a refund through the saga's own client works without it (a child interpreter
    where `requests` cannot be imported, against the recorded Stripe of the adapter's tests)."""
    from tests.recorded_stripe import RecordedStripe
    from tests.unit.test_stripe_provider import KEY, intent, refund

    child = (
        "import sys\n"
        "sys.modules['requests'] = None\n"
        "from saga.ports.payments import RefundRequest\n"
        "from saga.providers.stripe_provider import StripePaymentProvider, stripe_client\n"
        "client = stripe_client('sk_test_recorded', 2.0, sys.argv[1])\n"
        "provider = StripePaymentProvider(client, payment_reference=sys.argv[2])\n"
        "request = RefundRequest('case-1', 'case-1.refund', sys.argv[2], 2500, 'USD')\n"
        "print(provider.refund(request, idempotency_key=sys.argv[3]).refund_id)\n"
    )
    with RecordedStripe().running() as stripe:
        payment = intent()["id"]
        stripe.answer("GET", f"/v1/payment_intents/{payment}", (200, intent()))
        stripe.answer("POST", "/v1/refunds", (200, refund()))
        done = subprocess.run(
            [sys.executable, "-c", child, stripe.url, payment, KEY],
            cwd=PROJECT_ROOT / "lambdas",
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        sent = stripe.requests("POST", "/v1/refunds")
    assert done.stdout.strip() == refund()["id"], done.stderr
    assert [r.headers["idempotency-key"] for r in sent] == [KEY]
