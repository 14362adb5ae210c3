"""Inject Retry and TimeoutSeconds into the saga's ASL from the cdk context (docs/design.md §4).

The ASL file declares no Retry and no TimeoutSeconds: those are policy values and live in one
configuration place (`cdk.json` context, parsed by `stacks.config.SagaConfig`). This module is
pure (no CDK import) so the stack and the local emulator render exactly the same definition.

For every Task state, at any depth (Parallel branches, Map processors):
- Lambda tasks get the retrier of their policy class (chosen by `SagaConfig.retry_class_for`:
  state name, then the `${...}` substitution the task targets, then `default`) plus the
  `pending` retrier for ActionPending, and `lambda_task_timeout_seconds`;
- other service integrations (the SQS escalation) get their class's retrier only, and
  `service_task_timeout_seconds`.
The execution timeout becomes the top-level TimeoutSeconds. A Task that already declares Retry
or TimeoutSeconds is an error: two places for one policy would drift apart.

A Catch names the errors of a function that died as `@LambdaCrash` (stacks/lambda_errors.py),
expanded here (cdk.json's retry policies name it the same way): naming one of them on its own is
an error, so every Catch and Retry routes the family whole or not at all.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

from stacks.config import SagaConfig
from stacks.lambda_errors import ErrorNamesError, expand_error_names

PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_]*)\}")
_LAMBDA_RESOURCE_PREFIXES = ("arn:aws:states:::lambda:invoke", "arn:aws:lambda:", "${")


class DefinitionError(ValueError):
    """The ASL cannot take the injected policies (a Task already has Retry, bad shape)."""


def placeholders(definition: Any) -> set[str]:
    """Every `${Name}` used anywhere in the definition."""
    return set(PLACEHOLDER.findall(json.dumps(definition)))


def iter_states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, state) for every state, including those nested in Parallel and Map."""
    for name, state in definition.get("States", {}).items():
        yield name, state
        for branch in state.get("Branches", []):
            yield from iter_states(branch)
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from iter_states(state[key])


def task_target(state: dict[str, Any]) -> str | None:
    """The substitution a Task targets (FunctionName / QueueUrl / Resource), if any."""
    candidates = [state.get("Resource", "")]
    for field in ("Arguments", "Parameters"):
        args = state.get(field)
        if isinstance(args, dict):
            candidates += [str(v) for v in args.values() if isinstance(v, str)]
    for text in candidates:
        found = PLACEHOLDER.fullmatch(text)
        if found:
            return found.group(1)
    return None


def is_lambda_task(state: dict[str, Any]) -> bool:
    resource = str(state.get("Resource", ""))
    return resource.startswith(_LAMBDA_RESOURCE_PREFIXES)


def render_definition(definition: dict[str, Any], config: SagaConfig) -> dict[str, Any]:
    """A copy of the definition with Retry and TimeoutSeconds on every Task state."""
    rendered = copy.deepcopy(definition)
    if "TimeoutSeconds" in rendered:
        raise DefinitionError(
            "the ASL declares a top-level TimeoutSeconds; the execution timeout comes from cdk "
            "context ('workflow.execution_timeout_minutes')"
        )
    rendered["TimeoutSeconds"] = config.workflow.execution_timeout_minutes * 60
    _expand_catchers(rendered)
    tasks = 0
    for name, state in iter_states(rendered):
        if state.get("Type") != "Task":
            continue
        tasks += 1
        for field in ("Retry", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds"):
            if field in state:
                raise DefinitionError(
                    f"Task {name!r} declares {field} in the ASL; retries and timeouts come "
                    "from cdk context (cdk.json 'retry', 'task_retry_class', 'workflow')"
                )
        policy = config.retry_class_for(name, task_target(state))
        retry = [policy.to_retrier()]
        if is_lambda_task(state):
            retry.append(config.pending_policy.to_retrier())
            state["TimeoutSeconds"] = config.workflow.lambda_task_timeout_seconds
        else:
            state["TimeoutSeconds"] = config.workflow.service_task_timeout_seconds
        state["Retry"] = retry
    if tasks == 0:
        raise DefinitionError("the state machine definition has no Task state")
    return rendered


def _expand_catchers(definition: dict[str, Any]) -> None:
    for name, state in iter_states(definition):
        for position, catcher in enumerate(state.get("Catch", [])):
            try:
                catcher["ErrorEquals"] = expand_error_names(catcher.get("ErrorEquals", []))
            except ErrorNamesError as exc:
                raise DefinitionError(f"State {name!r} Catch #{position + 1} {exc}") from None
