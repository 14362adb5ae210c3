"""`case approve` asks before it signs: on stderr, so that `--json` keeps stdout for its JSON."""

from __future__ import annotations

import io

import pytest

from sagactl.commands.case_approve import NO_TERMINAL_RULE, _confirmed
from sagactl.errors import UsageError


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "confirmed"), [("y\n", True), ("yes\n", True), ("\n", False)])
def test_the_question_goes_to_stderr_and_only_yes_confirms(
    answer: str,
    confirmed: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    assert _confirmed("approve and sign this case?") is confirmed
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "approve and sign this case? [y/N] "


def test_without_a_terminal_it_asks_for_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with pytest.raises(UsageError) as refused:
        _confirmed("approve and sign this case?")
    assert str(refused.value) == f"not approved, nothing signed: {NO_TERMINAL_RULE}"
    assert "`sagactl case approve --case CASE_ID` asks, so it needs --yes" in NO_TERMINAL_RULE
