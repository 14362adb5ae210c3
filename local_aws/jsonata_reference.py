"""The reference JSONata implementation (jsonata-js), called from Python one batch at a time.

Step Functions parses every JSONata expression of a definition when the state machine is created
and documents JSONata 2.0.6 semantics; `jsonata-python`, which the local AWS evaluates with,
accepts some text that jsonata-js refuses. `reference_jsonata.js` runs the npm `jsonata` package
pinned in package.json: one Node process per batch of expressions (JSON on stdin and stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagactl.paths import with_pinned_node

SCRIPT = Path(__file__).with_name("reference_jsonata.js")
BATCH_TIMEOUT_SECONDS = 120


class ReferenceJsonataUnavailable(RuntimeError):
    """Node.js or the pinned `jsonata` npm package cannot be run."""


@dataclass(frozen=True)
class ParseError:
    """Why jsonata-js refuses an expression; `message` has no `S0xxx` prefix (as AWS shows it)."""

    code: str
    message: str
    position: int | None = None


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: a JSON value, undefined (nothing), or an error with its JSONata code."""

    value: Any = None
    undefined: bool = False
    error_code: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error_message is not None


@dataclass(frozen=True)
class _Answer:
    version: str
    results: list[Any]


def _run(mode: str, expressions: Sequence[str]) -> _Answer:
    node = shutil.which("node", path=with_pinned_node(os.environ)["PATH"])
    if node is None:
        raise ReferenceJsonataUnavailable(
            "Node.js is not on PATH: the local AWS parses JSONata with the reference "
            "implementation (npm `jsonata`, see package.json)"
        )
    request = json.dumps({"mode": mode, "expressions": list(expressions)})
    try:
        completed = subprocess.run(
            [node, str(SCRIPT)],
            input=request,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=BATCH_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReferenceJsonataUnavailable(f"the reference JSONata did not answer: {exc}") from exc
    if completed.returncode != 0:
        detail = completed.stderr.strip().splitlines()
        raise ReferenceJsonataUnavailable(
            "the reference JSONata failed (is node_modules installed? run `make venv`): "
            + (detail[0] if detail else f"exit {completed.returncode}")
        )
    answer = json.loads(completed.stdout)
    results = answer["results"]
    if len(results) != len(expressions):
        raise ReferenceJsonataUnavailable(
            f"the reference JSONata answered {len(results)} results for {len(expressions)}"
        )
    return _Answer(version=str(answer["version"]), results=results)


def reference_version() -> str:
    """The version of the `jsonata` package the reference script actually loads."""
    return _run("parse", []).version


def parse_errors(expressions: Sequence[str]) -> list[ParseError | None]:
    """For each expression, None if jsonata-js parses it, else why not. One Node run."""
    if not expressions:
        return []
    found: list[ParseError | None] = []
    for result in _run("parse", expressions).results:
        if result is None:
            found.append(None)
        else:
            found.append(
                ParseError(
                    code=str(result.get("code") or "UNKNOWN"),
                    message=str(result["message"]),
                    position=result.get("position"),
                )
            )
    return found


def evaluate_all(expressions: Sequence[str]) -> list[Evaluation]:
    """Evaluate self-contained expressions (no input) with jsonata-js. One Node run."""
    if not expressions:
        return []
    evaluations: list[Evaluation] = []
    for result in _run("evaluate", expressions).results:
        if "error" in result:
            error = result["error"]
            evaluations.append(
                Evaluation(error_code=error.get("code"), error_message=str(error["message"]))
            )
        elif result.get("undefined"):
            evaluations.append(Evaluation(undefined=True))
        else:
            evaluations.append(Evaluation(value=result["value"]))
    return evaluations
