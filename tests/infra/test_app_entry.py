"""`python app.py` as the CDK CLI runs it: a configuration mistake is a message, not a traceback.

(The successful synth is `build_app().app.synth()`, which the session's `synthesized` fixture
runs; `make demo` and `sagactl local up` run app.py itself.)"""

from __future__ import annotations

import json
import os
import sys

from tests.project import run_in_project


def test_a_bad_context_value_exits_1_with_the_key_named_and_no_traceback() -> None:
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"ledger.attempt_budget": "9"}),
    }
    done = run_in_project([sys.executable, "app.py"], env, timeout=300)
    assert done.returncode == 1
    assert "cdk.json context: context 'ledger.attempt_budget' is not read" in done.stderr
    assert "Traceback" not in done.stderr
    # jsii runs on the pinned Node 22 (tests/conftest.py puts it first on PATH): no warning
    # that the Node it found is end-of-life or untested.
    assert "end-of-life" not in done.stderr and "untested" not in done.stderr.lower()
