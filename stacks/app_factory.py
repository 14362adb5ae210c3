"""Build the CDK app: one stage's stack plus cdk-nag as a validation plugin.

`app.py` calls `build_app()`; the infrastructure tests call it too, with context overrides and
a temporary output directory, so what is tested is exactly what `cdk synth` produces.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.config import SagaConfig, reject_dotted_overrides
from stacks.saga_stack import DEFAULT_BUILD_CACHE, PROJECT_ROOT, SagaStack

CDK_JSON = PROJECT_ROOT / "cdk.json"


@dataclass(frozen=True)
class SagaApp:
    app: App
    stack: SagaStack
    config: SagaConfig
    nag: AwsSolutionsChecks


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    build_cache: Path = DEFAULT_BUILD_CACHE,
) -> SagaApp:
    """The app with its stack; `context` adds to (or overrides) cdk.json's context.

    cdk.json's context is loaded here too, so `python app.py` and the tests see the same values
    as the CDK CLI; under the CLI, its context (cdk.json plus `-c` flags) takes precedence.
    """
    defaults = json.loads(CDK_JSON.read_text(encoding="utf-8")).get("context", {})
    app = App(context={**defaults, **(context or {})}, outdir=outdir)
    reject_dotted_overrides(app.node.get_all_context())
    config = SagaConfig.from_context(app.node.try_get_context)
    # Account and region stay unresolved unless the CLI provides them: synth needs no AWS.
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = os.environ.get("CDK_DEFAULT_REGION")
    env = Environment(account=account, region=region) if account or region else None
    stack = SagaStack(
        app,
        config.stack_name,
        config=config,
        build_cache=build_cache,
        env=env,
        description=f"Replacement-order saga ({config.stage})",
    )
    nag = AwsSolutionsChecks(app)
    Validations.of(app).add_plugins(nag)
    return SagaApp(app=app, stack=stack, config=config, nag=nag)
