"""Every configuration in editor-configs/ starts a working server, as a user would paste it.

Each JSON entry (Zed, JetBrains, the VS Code / Cursor "ACP Client" extension), each command of
the CodeCompanion (Lua) and agent-shell (Elisp) snippets, and each Toad and acpx command line of
editor-configs/README.md is launched exactly as written, its placeholder paths replaced by this
checkout's, over real pipes through `initialize` and `session/new`; every frame is schema-checked.
The snippets' server flags and `ACP_SERVER_*` variables must exist in the one option table.
Identical entries of several files (the same command, arguments and env) are started once.
An entry for an ACP agent preset (`--agent claude`, `codex`, ...) starts the pinned real agent
of tests/agents.py, put on PATH and configured as the agent tests configure it, against its fake
model endpoint (it skips, or fails under CI, where that agent cannot be installed); an entry in
runner mode gets a runtime directory of its own and its runner is stopped afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import REAL_AGENTS
from runner_fronts import short_runtime_dir
from schema_check import check_agent_frame

from acp_server.cli.settings import SERVER_OPTIONS, env_name

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "editor-configs"
EDITORS_PAGE = REPO / "docs" / "editors.md"
PLACEHOLDER_COMMAND = "/path/to/acp-server/.venv/bin/acp-server"
PLACEHOLDER_ROOT = "/path/to/acp-server"
FLAGS = {flag for flag, _ in SERVER_OPTIONS}
ENV_NAMES = {env_name(flag) for flag in FLAGS}
START_TIMEOUT = 120  # seconds for initialize and session/new; well under one, or a few with a real agent
PRESET_AGENTS = {"claude": "claude", "codex": "codex", "gemini": "gemini", "fast-agent": "fast-agent"}
PRESET_AGENTS["hermes-acp"] = "hermes"  # the preset -> its agent in tests/agents.py


@dataclass(frozen=True)
class Launch:
    """One way a configuration starts the server: where it was found, the command, its env."""

    source: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict[str, str])

    def __str__(self) -> str:
        return self.source


def real(text: str) -> str:
    """A placeholder path as the user replaces it: this environment's command, this checkout."""
    installed = str(Path(sys.executable).with_name("acp-server"))
    return text.replace(PLACEHOLDER_COMMAND, installed).replace(PLACEHOLDER_ROOT, str(REPO))


# --- reading the configurations ------------------------------------------------------------


def json_launches() -> list[Launch]:
    """Every entry of the JSON files; entries that launch the same way are one, named by all."""
    found: dict[str, Launch] = {}
    for path in sorted(CONFIGS.glob("*.json")):
        document = json.loads(path.read_text())
        table = document.get("agent_servers") or document.get("acp.agents")
        assert table, f"{path.name}: no agent_servers or acp.agents entry"
        for name, entry in table.items():
            args, env = tuple(entry.get("args", [])), dict(entry.get("env", {}))
            key = json.dumps([entry["command"], args, sorted(env.items())])
            source = f"{path.name}: {name}"
            if key in found:
                source = f"{found[key].source}; {source}"
            found[key] = Launch(source, entry["command"], args, env)
    return list(found.values())


def lua_launches() -> list[Launch]:
    text = (CONFIGS / "codecompanion.lua").read_text()
    env_block = re.search(r"\benv = \{(.*?)\}", text, re.S)
    assert env_block, "codecompanion.lua: no env table"
    env = dict(re.findall(r'(\w+) = "([^"]*)"', env_block.group(1)))
    found = []
    for name, body in re.findall(r"(\w+) = \{(\s*\"[^{}]*?)\}", text):
        words = re.findall(r'"([^"]*)"', body)
        if words and words[0] == PLACEHOLDER_COMMAND:
            found.append(Launch(f"codecompanion.lua: commands.{name}", words[0], tuple(words[1:]), env))
    return found


def elisp_launches() -> list[Launch]:
    """The `:command-params` list and the alternatives its comment offers, with the snippet's env."""
    text = (CONFIGS / "agent-shell.el").read_text()
    command = re.search(r':command "([^"]*)"', text)
    env_list = re.search(r":environment-variables '\((.*?)\)", text, re.S)
    assert command and env_list, "agent-shell.el: no :command or :environment-variables"
    env = dict(item.split("=", 1) for item in re.findall(r'"([^"]*)"', env_list.group(1)))
    found = []
    for index, body in enumerate(re.findall(r"'\((\"--[^()]*)\)", text)):
        args = tuple(re.findall(r'"([^"]*)"', body))
        found.append(Launch(f"agent-shell.el: argument list {index + 1}", command.group(1), args, env))
    return found


def readme_launches() -> list[Launch]:
    """The server command lines of the Toad and acpx examples (editor-configs/README.md and the
    docs' Editors page), each with the variables set on its own shell line."""
    texts = {
        "editor-configs/README.md": (CONFIGS / "README.md").read_text(),
        "docs/editors.md": EDITORS_PAGE.read_text(),
    }
    found = []
    for name, text in texts.items():
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line)
                env = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S+", w))
                found += [_launch(f"{name}: {line[:60]}...", server, env) for server in _server_lines(words)]
    return found


def _server_lines(words: list[str]) -> list[str]:
    """The server command in `toad acp CMD`, `acpx ... --agent CMD` and `agent=CMD`."""
    lines = [w.removeprefix("agent=") for w in words if w.startswith("agent=/")]
    for i in range(1, len(words) - 1):
        if words[i + 1].startswith("/") and (words[i] == "--agent" or words[i - 1 : i + 1] == ["toad", "acp"]):
            lines.append(words[i + 1])
    return lines


def _launch(source: str, server: str, env: dict[str, str]) -> Launch:
    command, *args = shlex.split(server)
    return Launch(source, command, tuple(args), env)


SNIPPETS = [*lua_launches(), *elisp_launches(), *readme_launches()]


# --- launching -----------------------------------------------------------------------------


def start_session(launch: Launch, tmp_path: Path, extra_env: dict[str, str]) -> list[dict[str, Any]]:
    """Run the server as configured; return its frames for initialize and session/new. Each
    request waits for its answer (an agent below may take seconds to start), then stdin closes."""
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no user config file changes the outcome
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path / "home"),  # the hermes entry's ~/.hermes: a throw-away one
        **extra_env,
        **launch.env,
    }
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "config-test"}},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    argv = [real(launch.command), *(real(a) for a in launch.args)]
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )  # in the test's directory: an agent below may write there (fast-agent makes .fast-agent/)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    stderr: list[str] = []

    def read_stdout() -> None:
        for line in process.stdout or ():
            lines.put(line)

    threading.Thread(target=read_stdout, daemon=True).start()
    threading.Thread(target=lambda: stderr.append(process.stderr.read() if process.stderr else ""), daemon=True).start()
    frames: list[dict[str, Any]] = []
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            while not any(f.get("id") == request["id"] and "method" not in f for f in frames):
                try:
                    frames.append(json.loads(lines.get(timeout=START_TIMEOUT)))
                except queue.Empty:
                    pytest.fail(f"{launch}: no answer to {request['method']} within {START_TIMEOUT} s")
        process.stdin.close()
        code = process.wait(timeout=START_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, f"{launch}: {argv} exited {code}\nstderr: {''.join(stderr)}"
    methods = {1: "initialize", 2: "session/new"}
    for frame in frames:
        check_agent_frame(frame, None if "method" in frame else methods.get(frame.get("id")))
    return frames


@contextlib.contextmanager
def agent_below(launch: Launch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """What an entry for an ACP agent preset needs here: the pinned agent on PATH and its
    configuration (tests/agents.py: it skips, or fails in CI, when the agent cannot be
    installed), with its fake model endpoint running. Nothing for any other entry."""
    args = list(launch.args)
    preset = args[args.index("--agent") + 1] if "--agent" in args[:-1] else None
    if preset not in PRESET_AGENTS:
        yield {}
        return
    agent = REAL_AGENTS[PRESET_AGENTS[preset]]
    with agent.endpoint() as fake:
        below = agent.launch(tmp_path / "agent", fake.base_url)
        programs = os.path.dirname(below.command[0])
        yield below.env | {"PATH": f"{programs}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}


@contextlib.contextmanager
def runner_cleanup(launch: Launch) -> Iterator[dict[str, str]]:
    """For an entry in runner mode: a runtime directory of its own, and its runner stopped."""
    if "--runner" not in launch.args and launch.env.get("ACP_SERVER_RUNNER") not in ("1", "true"):
        yield {}
        return
    run_dir = short_runtime_dir()
    try:
        yield {"XDG_RUNTIME_DIR": run_dir}
    finally:
        env = {**os.environ, "XDG_RUNTIME_DIR": run_dir}
        subprocess.run([real(launch.command), "runner", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(run_dir, ignore_errors=True)


def check_started(launch: Launch, tmp_path: Path) -> None:
    with agent_below(launch, tmp_path) as agent_env, runner_cleanup(launch) as runner_env:
        frames = start_session(launch, tmp_path, agent_env | runner_env)
    answers = {f["id"]: f for f in frames if "id" in f and "method" not in f}
    assert "result" in answers[1], f"{launch}: initialize failed: {answers[1]}"
    assert answers[1]["result"]["protocolVersion"] == 1
    assert "result" in answers[2], f"{launch}: session/new failed: {answers[2]}"
    assert answers[2]["result"]["sessionId"]


# --- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("launch", json_launches(), ids=str)
def test_every_json_entry_starts_a_session_as_written(launch: Launch, tmp_path: Path):
    assert launch.command == PLACEHOLDER_COMMAND, f"{launch}: the README tells users to replace {PLACEHOLDER_COMMAND}"
    check_started(launch, tmp_path)


@pytest.mark.parametrize("launch", SNIPPETS, ids=str)
def test_every_lua_elisp_and_command_line_snippet_passes_options_that_exist(launch: Launch, tmp_path: Path):
    unknown = [a for a in launch.args if a.startswith("--") and a not in FLAGS]
    assert not unknown, f"{launch}: no such server option {unknown}; the options are {sorted(FLAGS)}"
    settings = [name for name in launch.env if name.startswith("ACP_SERVER_")]
    assert set(settings) <= ENV_NAMES, f"{launch}: no such setting {sorted(set(settings) - ENV_NAMES)}"
    check_started(launch, tmp_path)


def test_the_snippets_are_all_found():
    """The parsers above must not quietly find nothing when a snippet's layout changes."""
    sources = [launch.source.split(":")[0] for launch in SNIPPETS]
    assert sources.count("codecompanion.lua") == 3
    assert sources.count("agent-shell.el") == 3
    assert sources.count("editor-configs/README.md") == 4  # two for Toad, two for acpx
    assert sources.count("docs/editors.md") == 2  # one each
    assert {"--agent"} <= {a for launch in SNIPPETS for a in launch.args}


def test_the_readme_names_every_configuration_file():
    readme = (CONFIGS / "README.md").read_text()
    files = [p.name for p in CONFIGS.iterdir() if p.name != "README.md"]
    assert files and all(f"`{name}`" in readme for name in files), files


# --- the files agree with each other and with the docs ---------------------------------------

JSON_FILES = ("zed-settings.json", "jetbrains-acp.json", "vscode-settings.json")
NEEDS_NOTHING = ({"echo"}, {"scripted"})  # agents that run with nothing installed


def entries(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file's entries in order, without Zed's `type` (the only key the others have not)."""
    document = json.loads(path.read_text())
    table = document.get("agent_servers") or document.get("acp.agents")
    return [(name, {k: v for k, v in entry.items() if k != "type"}) for name, entry in table.items()]


def test_every_editor_file_has_the_same_entries_in_the_same_order_the_first_needing_nothing():
    first, *others = [entries(CONFIGS / name) for name in JSON_FILES]
    for name, other in zip(JSON_FILES[1:], others, strict=True):
        assert other == first, f"{name} differs from {JSON_FILES[0]}"
    assert first[0][1]["args"][:2] == ["--agent", "scripted"] and first[1][1]["args"] == ["--agent", "echo"]
    assert first[0][1]["env"] == first[1][1]["env"] == {}
    lua = [launch.args for launch in SNIPPETS if launch.source.startswith("codecompanion.lua")]
    elisp = [launch.args for launch in SNIPPETS if launch.source.startswith("agent-shell.el")]
    openai = (*first[2][1]["args"], "--model", first[2][1]["env"]["ACP_SERVER_MODEL"])
    assert lua == [tuple(first[0][1]["args"]), tuple(first[1][1]["args"]), openai]
    assert elisp == lua


def test_the_editors_page_shows_what_the_files_hold():
    page = EDITORS_PAGE.read_text()
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", page, re.S)]
    files = {"zed": entries(CONFIGS / "zed-settings.json"), "jetbrains": entries(CONFIGS / "jetbrains-acp.json")}
    assert len(blocks) == 2
    for block, (editor, held) in zip(blocks, files.items(), strict=True):
        shown = [
            (name, {k: v for k, v in entry.items() if k != "type"}) for name, entry in block["agent_servers"].items()
        ]
        assert shown == held[: len(shown)], f"the {editor} snippet of docs/editors.md is not how the file begins"
    zed = json.loads((CONFIGS / "zed-settings.json").read_text())["agent_servers"]
    assert all(entry["type"] == "custom" for entry in [*zed.values(), *blocks[0]["agent_servers"].values()])
    named = re.findall(r"^\| `(acp-server \([^`]*\))`(?:, `\(([^`]*)\)`)? \|", page, re.M)
    table = [name for pair in named for name in (pair[0], f"acp-server ({pair[1]})" if pair[1] else None) if name]
    assert table == [name for name, _ in files["zed"]], "the table of docs/editors.md lists other entries"
