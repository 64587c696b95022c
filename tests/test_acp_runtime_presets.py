"""`--agent acp -- COMMAND ARGS` and the presets on the command line (a missing program is
served, and named at `session/new`: test_agent_start.py); a preset prefers its own program to npx, takes
the config file's command, and starts an older Gemini CLI with its older flag; the command
after `--` reaches the server that `prompt` and runner mode start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from acp_child import Runtimes, child_argv
from stdio_server import StdioServer

from acp_server.cli.main import build_parser
from acp_server.cli.runner import runner_argv, runner_config
from acp_server.cli.settings import split_agent_command
from acp_server.downstream.presets import PRESETS, preset_agent

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


def start(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], input="", capture_output=True, text=True, env=env, timeout=60
    )


def program(directory: Path, name: str, body: str = "exit 0") -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """A PATH with nothing on it but what a test puts in `bin`."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_acp_without_a_command_says_how_to_give_one():
    done = start("--agent", "acp", env=dict(os.environ))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "acp-server: error: the acp agent needs the agent's command after `--`: "
        "acp-server --agent acp -- COMMAND [ARGS...] (see acp-server --help)"
    )


def test_a_command_after_the_separator_is_only_for_the_acp_agents():
    done = start("--agent", "echo", "--", "cat", env=dict(os.environ))
    assert done.returncode == 2
    agents = "acp, claude, codex, fast-agent, gemini, hermes-acp"
    assert f"a command after `--` applies only to the ACP agents ({agents}), not 'echo'" in done.stderr


def test_a_preset_prefers_its_own_program_to_npx(bare_path):
    program(bare_path, "npx")
    assert preset_agent("claude").command.argv == ("npx", "-y", "@zed-industries/claude-agent-acp")
    program(bare_path, "claude-agent-acp")
    assert preset_agent("claude").command.argv == ("claude-agent-acp",)
    assert PRESETS["claude"].installed()


def test_the_config_file_names_a_presets_command(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    command = json.dumps(list(child_argv(tmp_path, [{"match": "hi", "steps": [{"say": "hello from the config"}]}])))
    config.write_text(f"[agents.claude]\ncommand = {command}\n")
    monkeypatch.setenv("ACP_SERVER_CONFIG", str(config))
    server = StdioServer("--agent", "claude", cwd=str(tmp_path))
    try:
        sid = server.start_session(str(tmp_path))
        server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        said = [f["params"]["update"] for f in server.frames if f.get("method") == "session/update"]
        assert "hello from the config" in [
            u["content"]["text"] for u in said if u["sessionUpdate"] == "agent_message_chunk"
        ]
        init = next(f for f in server.frames if f.get("id") == 1)
        assert init["result"]["agentInfo"]["title"] == "acp-server (claude)"
    finally:
        server.kill()


def test_a_bad_command_in_the_config_file_is_named(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("[agents.codex]\ncommand = 42\n")
    monkeypatch.setenv("ACP_SERVER_CONFIG", str(config))
    done = start("--agent", "codex", env=dict(os.environ))
    assert done.stderr.strip().endswith(
        "[agents.codex] command must be a list of words or a command line (see acp-server --help)"
    )


@pytest.mark.parametrize(("version", "flag"), [("0.30.1", "--experimental-acp"), ("0.34.0", "--acp")])
def test_gemini_gets_the_flag_its_version_takes(version, flag, tmp_path, bare_path):
    agent = f"exec {sys.executable} {FAKE_AGENT} --store {tmp_path / 'store.json'}"
    program(
        bare_path,
        "gemini",
        f'[ "$1" = --version ] && {{ echo {version}; exit 0; }}\necho "$@" > {tmp_path / "args"}\n{agent}',
    )
    runtimes = Runtimes()
    runtime = preset_agent("gemini")
    runtimes.made.append(runtime)
    try:
        runtime.capabilities()
        assert (tmp_path / "args").read_text().split() == [flag]
    finally:
        runtimes.close()


def test_the_agents_command_reaches_the_server_prompt_starts(tmp_path):
    argv = child_argv(tmp_path, [{"match": "ping", "steps": [{"say": "pong from below"}]}])
    done = start("prompt", "--agent", "acp", "--cwd", str(tmp_path), "ping", "--", *argv, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "pong from below" in done.stdout


def test_runner_mode_passes_the_agents_command_and_tells_runners_apart_by_it():
    parser = build_parser()
    ours, command = split_agent_command(["--agent", "acp", "--", "my-agent", "--flag"])
    args = parser.parse_args(ours)
    args.agent_command = command
    assert runner_argv(args)[-3:] == ["--", "my-agent", "--flag"]
    other = parser.parse_args(ours)
    other.agent_command = ("other-agent",)
    assert runner_config(args) != runner_config(other)
