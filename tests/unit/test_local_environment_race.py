"""The local Lambda runtime applies a function's environment to the process's os.environ per
invoke, while other threads list it (moto's Step Functions interpreter creates a boto3 client,
which lists the proxy variables). Found by the fault campaign (seed 1, cases 322 and 436: a
concurrent duplicate's ValidateCase failed with States.Runtime, KeyError
'AWS_LAMBDA_FUNCTION_NAME')."""

from __future__ import annotations

import os
import threading
import urllib.request

from local_aws.lambda_runtime import applied_environment


def test_threads_may_list_the_environment_while_invokes_apply_and_restore_it() -> None:
    variables = {f"SAGA_RACE_{i}": str(i) for i in range(40)}
    stop = threading.Event()
    errors: list[BaseException] = []

    def invokes() -> None:
        while not stop.is_set():
            with applied_environment(variables):
                pass

    def lists() -> None:
        try:
            for _ in range(3000):
                urllib.request.getproxies_environment()  # os.environ.items()
                os.environ.copy()
        except Exception as exc:
            errors.append(exc)

    writer = threading.Thread(target=invokes)
    writer.start()
    try:
        reader = threading.Thread(target=lists)
        reader.start()
        reader.join()
    finally:
        stop.set()
        writer.join()
    assert errors == []
    assert not any(name.startswith("SAGA_RACE_") for name in os.environ)  # nothing leaked
