"""The emulator's JSONata (jsonata-python) and the reference (jsonata-js 2.0.6, as AWS runs it)
agree on every expression the saga evaluates on its end-to-end paths.

Every example scenario (and a rejected case, for the Fail state) runs through the real state
machine in the local AWS while each self-contained expression moto composes (variable
declarations for `$states` and the workflow variables, then the field's expression) is recorded
with the emulator's result. The same texts are then evaluated by jsonata-js, with $uuid and $hash
registered as jsonata_eval.py registers them, and any difference fails the test.

jsonata-python answers None for both `null` and undefined at the top level; moto tells them
apart with a follow-up `$exists(...)` evaluation, which is recorded and compared too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from local_aws import jsonata_eval
from local_aws.definition_validation import jsonata_expressions
from local_aws.environment import LocalAws
from local_aws.jsonata_eval import JsonataEvaluationError
from local_aws.jsonata_reference import Evaluation, evaluate_all
from tests.e2e.test_saga_paths import EXAMPLES, load_example

# Functions whose result differs between two evaluations of the same text.
NONDETERMINISTIC = ("$uuid(", "$now(", "$millis(", "$random(")


@dataclass(frozen=True)
class Recorded:
    expression: str
    value: Any = None
    error_code: str | None = None
    error_message: str | None = None


def scenarios() -> list[tuple[str, dict[str, Any]]]:
    found = [(path.stem, load_example(path.stem)) for path in sorted(EXAMPLES.glob("*.json"))]
    rejected = load_example("happy-path")
    rejected["case_id"] = "case-differential-rejected"
    rejected["refund"]["amount_minor"] = 999_999  # not what was approved: RejectCase (Fail)
    return [*found, ("rejected", rejected)]


def record_saga_expressions(
    local: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Recorded], dict[str, str]]:
    """Run every scenario; (each evaluation in order, each scenario's execution status)."""
    from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata

    evaluate = moto_jsonata._eval_jsonata
    assert evaluate is not None
    recorded: list[Recorded] = []

    def recording(expression: str) -> Any:
        try:
            value = evaluate(expression)
        except moto_jsonata.JSONataException as exc:
            cause = exc.__cause__
            code = cause.code if isinstance(cause, JsonataEvaluationError) else None
            recorded.append(Recorded(expression, error_code=code, error_message=str(exc.details)))
            raise
        recorded.append(Recorded(expression, value=value))
        return value

    monkeypatch.setattr(moto_jsonata, "_eval_jsonata", recording)
    statuses = {}
    for name, case in scenarios():
        description, _ = local.run_case(case)
        statuses[name] = description["status"]
    return recorded, statuses


def difference(mine: Recorded, reference: Evaluation) -> str | None:
    if mine.error_message is not None or reference.failed:
        both_failed = mine.error_message is not None and reference.failed
        if both_failed and mine.error_code == reference.error_code:
            return None
        return f"emulator: {mine.error_code} {mine.error_message}; reference: {reference}"
    if mine.value is None:  # null or undefined (see the module docstring)
        if reference.undefined or reference.value is None:
            return None
    elif not reference.undefined and mine.value == reference.value:
        return None
    return f"emulator: {mine.value!r}; reference: {reference}"


def test_the_emulator_evaluates_every_saga_expression_as_the_reference_does(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded, statuses = record_saga_expressions(local_aws, monkeypatch)
    assert statuses == {
        "carrier-unavailable": "SUCCEEDED",
        "compensation-stuck": "FAILED",
        "four-eyes": "SUCCEEDED",
        "happy-path": "SUCCEEDED",
        "lost-carrier-response": "SUCCEEDED",
        "lost-refund-response": "SUCCEEDED",
        "out-of-stock": "SUCCEEDED",
        "refund-rejected": "SUCCEEDED",
        "second-refund": "SUCCEEDED",
        "shipment-rejected": "SUCCEEDED",
        "rejected": "FAILED",
    }
    skipped = [r for r in recorded if any(f in r.expression for f in NONDETERMINISTIC)]
    compared = [r for r in recorded if r not in skipped]
    texts = sorted({r.expression for r in compared})
    # One text, one result: the emulator is deterministic on what is compared.
    by_text: dict[str, Recorded] = {}
    for r in compared:
        assert by_text.setdefault(r.expression, r) == r, r.expression

    references = dict(zip(texts, evaluate_all(texts), strict=True))

    differences = [
        f"{text[-300:]}\n  {found}"
        for text in texts
        if (found := difference(by_text[text], references[text])) is not None
    ]
    assert differences == []
    # What was compared: the definition's expressions reached on these paths.
    definition = json.loads(
        local_aws.client("stepfunctions").describe_state_machine(
            stateMachineArn=local_aws.state_machine_arn
        )["definition"]
    )
    fields = {e.text for e in jsonata_expressions(definition)}
    reached = {f for f in fields if any(t.endswith(f + ")") for t in texts)}
    print(
        f"compared {len(compared)} evaluations ({len(texts)} distinct texts), skipped "
        f"{len(skipped)} nondeterministic; {len(reached)} of {len(fields)} definition "
        "expressions reached"
    )
    assert len(texts) > len(reached) >= len(fields) // 2


def test_a_divergence_is_a_difference() -> None:
    """The comparison itself: the class of bug it exists for is reported, agreement is not."""
    text = "'the action\\'s reference'"
    with pytest.raises(JsonataEvaluationError) as caught:
        jsonata_eval.evaluate(text)
    mine = Recorded(text, error_code=caught.value.code, error_message=str(caught.value))
    (reference,) = evaluate_all([text])
    assert (mine.error_code, reference.error_code) == ("S0301", "S0103")
    assert difference(mine, reference) is not None

    assert difference(Recorded("1", value=1), Evaluation(value=2)) is not None
    assert difference(Recorded("1", value=None), Evaluation(value=0)) is not None
    assert difference(Recorded("1", value=None), Evaluation(undefined=True)) is None
    assert difference(Recorded("1", value={"a": [1]}), Evaluation(value={"a": [1]})) is None
