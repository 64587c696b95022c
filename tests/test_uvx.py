"""The registry's `uvx` distribution works: the wheel, built from a copy of the sources, holds
every package, and `uvx --from WHEEL acp-server` with the entry's arguments serves an editor
through `initialize` (offering Terminal Auth), `session/new` and a prompt to the fake model
endpoint. uv comes with the test extras; its cache makes every run after the first quick."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from installs import DOWNLOADS_ALLOWED, OPT_IN
from schema_check import check_agent_frame

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("acp_server", "adapters", "journal")
TIMEOUT = 600  # the first run fills uv's cache from PyPI
SEARCH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
UV, UVX = shutil.which("uv", path=SEARCH), shutil.which("uvx", path=SEARCH)

pytestmark = [
    pytest.mark.skipif(
        UVX is None and not os.environ.get("CI"), reason="uv is not installed (pip install -e '.[test]' brings it)"
    ),
    # uvx fills its cache with acp-server's dependencies from PyPI (about 50 MB) on a first run.
    pytest.mark.skipif(
        not DOWNLOADS_ALLOWED, reason=f"uvx downloads acp-server's dependencies; set {OPT_IN}=1 (CI does)"
    ),
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of what the sdist would hold, so the checkout gets no build/."""
    assert UV is not None and UVX is not None, "uv is missing: the test extras install it"
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [UV, "build", "--wheel", "--out-dir", str(out), str(source)], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_every_package_of_the_source_tree(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    packed = {str(Path(name).parent) for name in names if name.endswith("/__init__.py")}
    sources = {str(p.parent.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("__init__.py")}
    assert packed == sources
    scripts = [name for name in names if name.endswith("entry_points.txt")]
    assert "acp-server = acp_server.cli.main:main" in zipfile.ZipFile(wheel).read(scripts[0]).decode()


def test_uvx_from_the_wheel_serves_an_editor_through_a_prompt(wheel, tmp_path):
    registry = json.loads((ROOT / "registry" / "acp-server" / "agent.json").read_text())["distribution"]["uvx"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_SERVER_", "OPENAI_", "VIRTUAL_ENV"))}
    with FakeOpenAI(models=["m-one"]) as fake:
        fake.script(reply("Served from the wheel."))
        environ |= {
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "OPENAI_BASE_URL": fake.base_url,
            **registry.get("env", {}),
        }
        requests = [
            ("initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}),
            ("session/new", {"cwd": str(tmp_path), "mcpServers": []}),
            ("session/prompt", {"sessionId": "SESSION", "prompt": [{"type": "text", "text": "hi"}]}),
        ]
        server = subprocess.Popen(
            [str(UVX), "--python", sys.executable, "--from", str(wheel), "acp-server", *registry["args"]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environ,
            cwd=tmp_path,
        )
        assert server.stdin is not None and server.stdout is not None
        try:
            answers, updates = exchange(server, requests)
            server.stdin.close()
            assert server.wait(TIMEOUT) == 0
        finally:
            if server.poll() is None:
                server.kill()
            server.wait()
            stderr = server.stderr.read().decode() if server.stderr else ""

    init, _session, done = answers
    assert [m["type"] for m in init["authMethods"]] == ["terminal"], stderr
    assert init["agentInfo"]["title"] == "acp-server (openai)"
    assert done["stopReason"] == "end_turn"
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Served from the wheel."


def exchange(server: subprocess.Popen, requests: list[tuple[str, dict]]) -> tuple[list[dict], list[dict]]:
    """Each request's result in turn (the session id filled in), and the updates on the way."""
    assert server.stdin is not None and server.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=read, daemon=True).start()
    answers: list[dict] = []
    updates: list[dict] = []
    for number, (method, params) in enumerate(requests):
        if answers and "sessionId" in params:
            params = {**params, "sessionId": answers[1]["sessionId"]}
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode())
        server.stdin.write(b"\n")
        server.stdin.flush()
        while True:
            line = lines.get(timeout=TIMEOUT)  # the first answer waits for uvx to install
            assert line, f"the server closed its stdout while {method} was open"
            frame = json.loads(line)
            check_agent_frame(frame, method if "method" not in frame else None)
            if frame.get("method") == "session/update":
                updates.append(frame["params"]["update"])
            elif frame.get("id") == number:
                assert "result" in frame, frame
                answers.append(frame["result"])
                break
    return answers, updates
