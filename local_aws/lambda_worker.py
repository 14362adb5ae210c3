"""One Lambda execution environment of the local AWS: a process for one function configuration.

The local AWS (local_aws.lambda_pool) starts it with the function's environment, sends it
the function (its init: the handler is imported once, with that environment, as Lambda's init
phase does), then one invocation at a time over a socket, until it closes the socket. Like a
Lambda container it is warm and reused, and it runs one invocation at a time; concurrent
invocations run in as many processes, each with its own environment, globals and output.

Messages are JSON documents (multiprocessing's framing):
- in: {"init": {...}}, then {"invoke": {...}} per invocation;
- out: {"ready": true} or {"init_error": answer}; per invocation, a {"call": ...} for each AWS
  call the handler makes (only while the local AWS records them) and one {"answer": ...}.

Handler output (stdout, stderr) goes to the process's own stdout, which the local AWS forwards
to its handler log; each invocation ends its output with `END_OF_OUTPUT` so that the server has
forwarded all of it before the invocation returns. A handler that dies (a `SimulatedCrash`:
the local AWS told it to) answers how, and the process exits, as a dead process would.
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing.connection import Connection
from typing import Any

END_OF_OUTPUT = "\x00saga-end-of-invocation"


class _Invocation:
    """The invocation this process serves (one at a time)."""

    request_id: str | None = None
    recording = False
    channel: Connection | None = None


def _current_request() -> str | None:
    return _Invocation.request_id


def _send(channel: Connection, document: dict[str, Any]) -> None:
    channel.send_bytes(json.dumps(document).encode("utf-8"))


def _install_recording() -> None:
    """Send every AWS call of the handler to the local AWS before it is made (while recording)."""
    from botocore.client import BaseClient

    from local_aws.lambda_context import to_wire
    from local_aws.patching import wrap_once

    def wrap(original: Any) -> Any:
        def recorded(self: Any, operation_name: str, api_params: Any) -> Any:
            channel = _Invocation.channel
            if _Invocation.recording and channel is not None:
                service = self.meta.service_model.signing_name
                region = str(self.meta.region_name)
                call = {"service": service, "operation": operation_name, "region": region}
                _send(channel, {"call": {**call, "params": to_wire(api_params)}})
            return original(self, operation_name, api_params)

        return recorded

    wrap_once(BaseClient, "_make_api_call", "_saga_worker_records", wrap)


def _initialise(init: dict[str, Any]) -> Any:
    """The process as the function's sandbox: its path, the local clock, then its handler."""
    sys.path[:] = list(init["sys_path"])
    from local_aws.lambda_context import load_handler, tag_handler_requests
    from local_aws.shared_clock import SharedOffset
    from saga import clock as saga_clock

    if init.get("clock"):
        saga_clock.use(SharedOffset(str(init["clock"]), writable=False).now)
    tag_handler_requests(_current_request)
    _install_recording()
    return load_handler(str(init["handler"]))


def _end_output() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, f"\n{END_OF_OUTPUT}\n".encode())


def _serve(channel: Connection, handler: Any, function: dict[str, Any]) -> None:
    from local_aws.lambda_context import (
        LocalClientContext,
        LocalLambdaContext,
        call_handler,
    )

    while True:
        try:
            message = json.loads(channel.recv_bytes())
        except (EOFError, OSError):
            return  # the local AWS closed the channel: this environment is retired
        invoke = message["invoke"]
        context = LocalLambdaContext(
            function_name=function["function_name"],
            function_version=function["version"],
            invoked_function_arn=function["function_arn"],
            memory_limit_in_mb=int(function["memory_mb"]),
            timeout_seconds=float(invoke["remaining_seconds"]),
            aws_request_id=str(invoke["request_id"]),
            client_context=LocalClientContext.from_json(invoke.get("client_context")),
        )
        _Invocation.request_id, _Invocation.recording = context.aws_request_id, invoke["record"]
        try:
            answer = call_handler(handler, invoke["event"], context)
        finally:
            _Invocation.request_id, _Invocation.recording = None, False
            _end_output()
        _send(channel, {"answer": answer.to_json()})
        if answer.died is not None:
            return  # the process died there: the next invocation gets a new one


def main(argv: list[str]) -> int:
    channel = Connection(int(argv[1]))
    _Invocation.channel = channel
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    init = json.loads(channel.recv_bytes())["init"]
    try:
        handler = _initialise(init)
    except Exception as exc:
        from local_aws.lambda_context import import_error_payload

        payload = json.dumps(import_error_payload(str(init["handler"]), exc))
        _end_output()
        _send(channel, {"init_error": {"payload": payload, "errored": True, "logs": str(exc)}})
        return 1
    _end_output()
    _send(channel, {"ready": True})
    _serve(channel, handler, init["function"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
