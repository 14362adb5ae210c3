"""A mistyped command, subcommand or choice gets a "did you mean" (argparse's own
`suggest_on_error` exists only from Python 3.14: sagactl.cli.SuggestingParser)."""

from __future__ import annotations

import pytest

from sagactl.cli import main


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["strat", "case.json"], "did you mean 'start'?"),
        (["local", "dwon"], "did you mean 'down'?"),
        (["case", "aprove", "case.json"], "did you mean 'approve'?"),
        (["escalations", "reslove", "case-1"], "did you mean 'resolve'?"),
        (["local", "demo", "--scenario", "hapy-path"], "did you mean 'happy-path'?"),
    ],
)
def test_a_typo_gets_the_closest_name(
    argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"; {suggestion}"), last
    assert "invalid choice" in last


def test_nothing_close_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["xyzzy"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "invalid choice: 'xyzzy'" in last and "did you mean" not in last
