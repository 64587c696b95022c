"""Start-up imports only what `initialize` and `session/new` need: the default `openai` agent of a
plain install starts without importing httpx or mcp (they wait for the first prompt), and the
dispatcher does not pull in jsonrpcserver's HTTP server or request validator. Checked with
`python -X importtime` over a real subprocess; speed itself is in bench/compare.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}


def imported_until_session_new(
    tmp_path: Path, *args: str, mcp_servers: list[dict[str, object]], prompt: str | None = None
) -> set[str]:
    """Every module the server imports while answering initialize and session/new (and with
    `prompt`, a first turn of that text), then EOF."""
    new = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/new",
        "params": {"cwd": str(tmp_path), "mcpServers": mcp_servers},
    }
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_CONFIG"))}
    environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # no config file: a fresh install
    server = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "acp_server", *args, "--db", str(tmp_path / "j.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=environ,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("".join(json.dumps(frame) + "\n" for frame in (INIT, new)))
    server.stdin.flush()
    responses = [json.loads(server.stdout.readline()) for _ in range(2)]
    if prompt is not None and "result" in responses[-1]:
        turn = {"sessionId": responses[-1]["result"]["sessionId"], "prompt": [{"type": "text", "text": prompt}]}
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": turn}) + "\n")
        server.stdin.flush()
        while "id" not in responses[-1] or responses[-1]["id"] != 2:
            responses.append(json.loads(server.stdout.readline()))
    stdout, stderr = server.communicate(timeout=60)
    done = subprocess.CompletedProcess(server.args, server.returncode, stdout, stderr)
    answered = [r.get("id") for r in responses if "result" in r]
    assert answered == [0, 1] + ([2] if prompt is not None else []), str(responses) + done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_the_default_openai_agent_starts_without_importing_httpx_or_mcp(tmp_path):
    mcp_server = {"name": "files", "command": sys.executable, "args": ["-c", "pass"], "env": []}
    modules = imported_until_session_new(tmp_path, "--agent", "openai", mcp_servers=[mcp_server])
    assert "adapters.openai.agent" in modules
    assert top_level(modules).isdisjoint({"httpx", "httpcore", "mcp", "mcp_types", "pathspec"})


def test_answering_initialize_and_session_new_loads_no_pydantic(tmp_path):
    mcp_server = {"name": "files", "command": sys.executable, "args": ["-c", "pass"], "env": []}
    for agent in ("openai", "echo"):
        modules = imported_until_session_new(tmp_path, "--agent", agent, mcp_servers=[mcp_server])
        assert "acp_server.acp.handlers" in modules
        assert top_level(modules).isdisjoint({"pydantic", "pydantic_core"}), agent
        assert "acp_server.protocol.models" not in modules


def test_a_first_text_prompt_loads_no_pydantic(tmp_path):
    """The first turn's reply is not held up building pydantic's models: a plain prompt is read
    without them, and the editor's answers that need them load them when one arrives; ctypes
    (openat2) waits for the first file opened."""
    modules = imported_until_session_new(tmp_path, "--agent", "echo", mcp_servers=[], prompt="hello")
    assert "acp_server.turns.services" in modules  # the turn ran with the editor-side services
    assert top_level(modules).isdisjoint({"pydantic", "pydantic_core", "ctypes", "uuid"})
    assert "acp_server.protocol.models" not in modules


def test_serving_does_not_import_jsonrpcservers_http_server_or_its_validator(tmp_path):
    modules = imported_until_session_new(tmp_path, "--agent", "echo", mcp_servers=[])
    assert "jsonrpcserver.async_dispatcher" in modules
    assert "jsonschema" not in top_level(modules)
    assert {"http.server", "jsonrpcserver.server", "jsonrpcserver.main"}.isdisjoint(modules)
    assert "oslash.either" in modules  # jsonrpcserver's results; oslash's other monads wait
    assert {"oslash.list", "oslash.ioaction", "oslash.state"}.isdisjoint(modules)
    assert {"acp_server.cli.inspect", "acp_server.cli.setup", "acp_server.cli.pair"}.isdisjoint(
        modules
    )  # commands' parsers


def test_jsonrpcserver_and_oslash_still_offer_their_package_names_to_anyone_else_in_the_process():
    code = (
        "import acp_server.rpc.dispatch, sys; assert 'jsonschema' not in sys.modules; "
        "from jsonrpcserver import dispatch, serve, Success; import jsonrpcserver; "
        "print(callable(dispatch), callable(serve), jsonrpcserver.Success is Success); "
        "import oslash, oslash.either; from oslash import Just, Left; "
        "print(Just(2).map(lambda x: x + 1) == Just(3), Left is oslash.either.Left)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "True", "True", "True"], done.stderr


def test_a_plain_install_brings_what_the_default_agent_and_its_mcp_passthrough_need():
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    base = {
        Requirement(line).name
        for line in requires("acp-server") or []
        if Requirement(line).marker is None  # not behind an extra
    }
    assert {"httpx", "pathspec", "mcp"} <= base
