import argparse
import json

import pytest
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from sagactl.errors import Refused, guarded


@pytest.mark.parametrize(
    "error",
    [
        ReadTimeoutError(endpoint_url="http://127.0.0.1:4566"),
        ConnectTimeoutError(endpoint_url="http://127.0.0.1:4566"),
    ],
)
def test_client_timeouts_are_a_message_and_exit_1_not_a_traceback(
    error: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(_args: argparse.Namespace) -> int:
        raise error

    code = guarded(handler)(argparse.Namespace(json=True))

    out, err = capsys.readouterr()
    assert code == 1
    assert "127.0.0.1:4566" in err and err.startswith("sagactl: AWS call failed")
    assert '"type": "' + type(error).__name__ + '"' in out
    assert "Traceback" not in err


def test_an_errors_own_lines_are_lines_and_what_it_quotes_stays_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refusing(args: argparse.Namespace) -> int:
        raise Refused(ValueError("quoted\ntext"), "  item one", "what to do next")

    assert guarded(refusing)(argparse.Namespace(json=False)) == 3  # refused
    assert capsys.readouterr().err.splitlines() == [
        "sagactl: quoted\\x0atext",
        "  item one",
        "what to do next",
    ]
    assert guarded(refusing)(argparse.Namespace(json=True)) == 3
    shown = json.loads(capsys.readouterr().out)["error"]
    assert shown == {"type": "Refused", "message": "quoted\ntext\n  item one\nwhat to do next"}
