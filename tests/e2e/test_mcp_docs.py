"""`sagactl mcp` as the README documents it, executed: the stdio host configuration (run as a
host runs it), the HTTP server's own lines and the client configuration it prints, the minimal
Python client (run as a script against that server), a busy port, and the tools' annotations
read through the `mcp` package's own client, each checked against what the tool really does.

What a test must change in a documented snippet is only where this machine differs from a
user's: the clone's path, the local AWS's endpoint and outputs file, the server's port.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from local_aws.environment import LocalAws
from sagactl.commands.mcp import DEFAULT_HTTP_PORT
from sagactl.paths import PROJECT_ROOT
from tests.tools_harness import agent_proposal

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
DOC_PORT = DEFAULT_HTTP_PORT
DOC_ENDPOINT = "http://127.0.0.1:4566"
DOC_CLONE = "/absolute/path/to/clone"
SAGACTL_MCP = [sys.executable, "-m", "sagactl.cli", "mcp", "--tenant", "acme"]
EXPECTED_ANNOTATIONS = {
    "propose_replacement": (False, False, True, False),
    "get_replacement": (True, False, True, False),
    "start_replacement": (False, True, True, True),
}  # (read-only, destructive, idempotent, open world)


def readme_block(info: str) -> str:
    """The body of the README's one fenced block whose info string is `info`."""
    found = re.findall(rf"^```{re.escape(info)}\n(.*?)^```", README, re.MULTILINE | re.DOTALL)
    assert len(found) == 1, f"README.md has {len(found)} ```{info} blocks, expected 1"
    return str(found[0])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def outputs(local_aws: LocalAws, tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    local_aws.write_outputs(path)
    return path


def _scan_all(local: LocalAws) -> dict[str, list[dict[str, Any]]]:
    ddb = local.client("dynamodb")
    return {
        table: sorted(ddb.scan(TableName=table)["Items"], key=json.dumps)
        for table in ddb.list_tables()["TableNames"]
    }


def test_the_documented_stdio_config_serves_tools_whose_annotations_are_true(
    local_aws: LocalAws, outputs: Path
) -> None:
    entry = json.loads(readme_block("json mcp-stdio"))["mcpServers"]["replacement-saga"]
    command = entry["command"].replace(DOC_CLONE, str(PROJECT_ROOT))
    # resolved: a copy of the tree whose .venv is a link to this one (`make mutate`) is the same
    assert Path(command).resolve() == (Path(sys.executable).parent / "sagactl").resolve()
    env = {**entry.get("env", {}), "SAGA_LOCAL_OUTPUTS": str(outputs), "PATH": os.environ["PATH"]}
    params = StdioServerParameters(command=command, args=entry["args"], env=env)
    proposal = agent_proposal("4242")

    async def host() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            first = await session.call_tool("propose_replacement", proposal)
            assert first.structured_content is not None, first
            case_id = first.structured_content["case_id"]
            again = await session.call_tool("propose_replacement", proposal)
            before_get = _scan_all(local_aws)
            got = [await session.call_tool("get_replacement", {"case_id": case_id})] * 2
            after_get = _scan_all(local_aws)
            return {
                "tools": tools,
                "proposed": [first.structured_content, again.structured_content],
                "got": [g.structured_content for g in got],
                "unchanged_by_get": before_get == after_get,
            }

    seen = anyio.run(host)
    annotations = {
        tool.name: (
            tool.annotations.read_only_hint,
            tool.annotations.destructive_hint,
            tool.annotations.idempotent_hint,
            tool.annotations.open_world_hint,
        )
        for tool in seen["tools"]
        if tool.annotations is not None
    }
    assert annotations == EXPECTED_ANNOTATIONS
    # What the hints promise, observed: get changed nothing; propose twice is one draft and no
    # effect anywhere (no execution, refund or shipment).
    assert seen["unchanged_by_get"]
    first, again = seen["proposed"]
    assert (first["created"], again["created"], again["case_id"]) == (True, False, first["case_id"])
    assert [g["status"] for g in seen["got"]] == ["APPROVAL_PENDING"] * 2
    ddb = local_aws.client("dynamodb")
    assert ddb.scan(TableName=local_aws.outputs["DraftsTableName"])["Count"] == 1
    for table in ("PaymentsTableName", "ShipmentsTableName", "CasesTableName"):
        assert ddb.scan(TableName=local_aws.outputs[table])["Count"] == 0
    sfn = local_aws.client("stepfunctions")
    assert sfn.list_executions(stateMachineArn=local_aws.state_machine_arn)["executions"] == []


class _Lines:
    """A process's stderr, read line by line in a thread, waited for with a bound."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, prefix: str, timeout: float = 60) -> list[str]:
        with self._changed:
            self._changed.wait_for(
                lambda: any(line.startswith(prefix) for line in self.lines), timeout
            )
            return list(self.lines)


@pytest.fixture
def http_server(local_aws: LocalAws, outputs: Path) -> Iterator[tuple[int, list[str]]]:
    """`sagactl mcp --tenant acme --http --local --port P`: the port and its first lines."""
    port = free_port()
    env = {**os.environ, "SAGA_LOCAL_OUTPUTS": str(outputs)}
    env.pop("AWS_ENDPOINT_URL", None)  # --local finds the endpoint in the outputs file
    process = subprocess.Popen(
        [*SAGACTL_MCP, "--http", "--local", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = _Lines(process).wait_for("client config: ")
        assert process.poll() is None, lines
        yield port, lines
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_http_server_prints_the_documented_url_and_client_config(
    local_aws: LocalAws, http_server: tuple[int, list[str]]
) -> None:
    port, lines = http_server
    console = _documented_console("sagactl mcp --tenant acme --http --local")
    documented = [
        line.replace(f":{DOC_PORT}/", f":{port}/").replace(DOC_ENDPOINT, local_aws.endpoint)
        for line in console
    ]
    assert lines == documented
    config_line = json.loads(lines[-1].removeprefix("client config: "))
    documented_config = json.loads(
        readme_block("json mcp-http").replace(f":{DOC_PORT}/", f":{port}/")
    )
    assert config_line == documented_config
    assert config_line["mcpServers"]["replacement-saga"]["url"] == f"http://127.0.0.1:{port}/mcp"


def _documented_console(command: str) -> list[str]:
    """The output lines the README shows under `$ command` in a ```console block."""
    for body in re.findall(r"^```console[^\n]*\n(.*?)^```", README, re.MULTILINE | re.DOTALL):
        lines = str(body).splitlines()
        if f"$ {command}" in lines:
            start = lines.index(f"$ {command}") + 1
            end = next(
                (i for i in range(start, len(lines)) if lines[i].startswith("$ ")), len(lines)
            )
            return lines[start:end]
    raise AssertionError(f"README.md shows no `$ {command}` in a ```console block")


def test_the_documented_python_client_runs_against_the_http_server(
    http_server: tuple[int, list[str]], tmp_path: Path
) -> None:
    port, _ = http_server
    client = tmp_path / "client.py"
    code = readme_block("python mcp-client")
    assert f":{DOC_PORT}/mcp" in code
    client.write_text(code.replace(f":{DOC_PORT}/mcp", f":{port}/mcp"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # loopback only
    done = subprocess.run(
        [sys.executable, str(client)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "propose_replacement writes",
        "get_replacement read-only",
        "start_replacement writes",
    ]
    assert re.fullmatch(r"agt_acme_[a-z2-7]{12} APPROVAL_PENDING", done.stdout.splitlines()[3])


def test_a_busy_port_says_pass_port_and_exits_1(outputs: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [*SAGACTL_MCP, "--http", "--local", "--outputs", str(outputs), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"sagactl: cannot listen on 127.0.0.1:{port}: Address already in use (another program "
        "holds the port: stop it, or pass --port)"
    )
    helped = subprocess.run(
        [sys.executable, "-m", "sagactl.cli", "mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "exit status:" in helped.stdout
    assert "1    an error: the port is in use (pass --port)" in helped.stdout
