"""Text from a case or from AWS never drives the operator's terminal (sagactl.views.untrusted).

Each view is driven with records of the local AWS that carry terminal control sequences: an
OSC 52 sequence (writes the clipboard), CSI sequences (clears the screen, colours), U+009B (CSI
in one character), a bidi override and isolate (reorder what is shown), a carriage return
(rewrites the line) and a newline (forges a line). They come from where they would on AWS: an
approval's `key_id` (not covered by the signature) quoted by ValidateCase's refusal; an
unexpected failure's message (a service's error text) as the execution's cause; a case record's
escalation and a ledger record's error (a downstream's message), as a writer of those tables
leaves them. Every text view shows them written out (`\\x1b`, `\\u202e`), none passes one to
the terminal; JSON output escapes them by itself.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from local_aws.environment import LocalAws
from saga.handlers import validate_case as validate_case_handler
from sagactl.errors import SagactlError, guarded
from sagactl.views.untrusted import visible
from tests.cli.sagactl_helpers import Result, Sagactl, example, run_example, saga, sagactl

__all__ = ["saga", "sagactl"]

HOSTILE = "\x1b]52;c;b3duZWQ=\x07\x1b[2J\x9b31m\u202eDEVLOSER\u2066\r\nforged line"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\r")


def shown_safely(result: Result, *, shown: bool = True) -> None:
    """Nothing in the command's output drives a terminal; with `shown`, the hostile text was
    printed (written out), not dropped."""
    text = result.out + result.err
    for char in RAW:
        assert char not in text, (repr(char), text[-1500:])
    assert "\nforged line" not in text, text[-1500:]  # one line of the record stays one line
    if shown:
        assert "\\x1b]52;c;" in text and "\\u202e" in text, text[-1500:]


def test_visible_writes_out_what_drives_a_terminal_and_keeps_the_rest() -> None:
    assert visible("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert visible("\x9b2J \u202ecba\u202c \u2067x\u2069 \u200f") == (
        "\\x9b2J \\u202ecba\\u202c \\u2067x\\u2069 \\u200f"
    )
    assert visible("a\nb\tc\rd\x00\x7f") == "a\\x0ab\\x09c\\x0dd\\x00\\x7f"
    kept = "Zoë Ångström, 東京 3-1, Ünïcödé €20.00 (\\ stays)"
    assert visible(kept) == kept


def test_a_refused_and_a_failed_execution_are_shown_written_out(
    saga: LocalAws,
    sagactl: Sagactl,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    handlers_in_this_process: None,
) -> None:
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["case_id"] = "case-hostile-key"
    forged = sign_locally(case)
    forged["approval"]["key_id"] = HOSTILE  # the signature does not cover it
    saga.wait_for_execution(saga.start_case(forged))

    # A function that fails unexpectedly: its exception's message becomes the cause (a
    # service's error text, a bug's message), with whatever it quoted.
    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"the cases table answered: {HOSTILE}")

    with monkeypatch.context() as patch:
        patch.setattr(validate_case_handler, "validate_case", crash)
        saga.wait_for_execution(saga.start_case(sign_locally({**case, "case_id": "case-crashed"})))
    for case_id in ("case-hostile-key", "case-crashed"):
        for argv in (("status", case_id), ("watch", case_id, "--timeout", "30")):
            result = sagactl(*argv)
            assert result.code in (0, 5, 6, 7), (argv, result.err)
            shown_safely(result, shown=case_id == "case-crashed")
        as_json = sagactl("status", case_id, "--json")
        shown_safely(as_json, shown=False)
        if case_id == "case-crashed":  # the cause as given: JSON writes \u001b, for programs
            assert "\\u001b" in as_json.out, as_json.out[-800:]
    # The redrive plan quotes the failed state's cause (printed before it asks, then refused:
    # no terminal to confirm on).
    planned = sagactl("redrive", "case-crashed")
    assert "RuntimeError" in planned.out, (planned.out, planned.err)
    shown_safely(planned)
    # The refusal itself quotes the key it was given with repr.
    refused = sagactl("status", "case-hostile-key")
    assert "key '\\x1b]52;c;" in refused.out, refused.out[-1500:]
    # The top-level error printer: `case check --deployed` refuses the same key.
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged), encoding="utf-8")
    checked = sagactl("case", "check", str(path), "--deployed")
    assert checked.code != 0 and "is not a trusted key" in checked.err, checked.err
    shown_safely(checked)


def _tamper(local: LocalAws, output: str, key: dict[str, Any], expression: str) -> None:
    """What a writer of the table leaves there (a downstream's message, a person's note)."""
    local.client("dynamodb").update_item(
        TableName=local.outputs[output],
        Key=key,
        UpdateExpression=expression,
        ExpressionAttributeValues={":h": {"S": HOSTILE}},
    )


def test_an_escalated_case_and_its_stuck_action_are_shown_written_out(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    assert sagactl("inventory", "seed", "--sku", "SKU-RED-MUG=100").code == 0
    run_example(sagactl, saga, "carrier-unavailable")
    case_id = "case-carrier-unavailable"
    _tamper(
        saga,
        "CasesTableName",
        {"case_id": {"S": case_id}},
        "SET escalation.detail = :h, escalation.decision_needed = :h",
    )
    saga.client("dynamodb").update_item(
        TableName=saga.outputs["LedgerTableName"],
        Key={"action_key": {"S": f"acme#ship#{case_id}.ship"}},
        UpdateExpression="SET #e = :e, case_id = :h",
        ExpressionAttributeNames={"#e": "error"},
        ExpressionAttributeValues={
            ":e": {"M": {"type": {"S": "CarrierUnavailable"}, "message": {"S": HOSTILE}}},
            ":h": {"S": HOSTILE},
        },
    )
    saga.clock.advance(600)  # the shipment's lease is long over: a stuck action

    for argv in (
        ("status", case_id),
        ("escalations",),
        ("escalations", "show", case_id),
        ("ledger", "--case", case_id),
        ("ledger", f"acme#ship#{case_id}.ship"),
        ("stuck",),
    ):
        result = sagactl(*argv)
        assert result.code == 0, (argv, result.err)
        shown_safely(result)
    for as_json in (("escalations", "show", case_id, "--json"), ("stuck", "--json")):
        shown_safely(sagactl(*as_json), shown=False)
    # A person's decision is text another person reads: resolving with one, then the views.
    resolved = sagactl("escalations", "resolve", case_id, "--decision", HOSTILE)
    assert resolved.code == 0, resolved.err
    shown_safely(resolved)
    for view in ("status", "escalations show"):
        result = sagactl(*view.split(), case_id)
        assert result.code == 0, (view, result.err)
        shown_safely(result)


def test_the_error_printer_writes_out_what_an_error_quotes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise SagactlError(f"AWS answered: {HOSTILE}")

    assert guarded(failing)(argparse.Namespace(json=False)) == 1
    captured = capsys.readouterr()
    shown_safely(Result(1, captured.out, captured.err))
    assert guarded(failing)(argparse.Namespace(json=True)) == 1
    captured = capsys.readouterr()
    shown_safely(Result(1, captured.out, ""), shown=False)  # the JSON error: \u001b
    shown_safely(Result(1, "", captured.err))
