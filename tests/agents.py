"""The five real ACP agents, each started offline against a fake of its own model API.

For each agent, `REAL_AGENTS[name]` says which fake it talks to, how to start it (`launch`:
command line, environment with a throw-away HOME and config under the test's directory,
pointed at the fake's base URL, with the agent's quirks) and how its model makes it act (a
streamed text, and a tool call that writes hello.txt and needs the user's permission). `require`
installs the agent on first use (tests/agent_installs.py) or skips with the reason (fails under
CI). tests/agent_client.py talks ACP to the process started from a `Launch`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import fake_anthropic
import fake_gemini
import fake_openai
import fake_responses
from agent_installs import NODE_AGENTS, InstallError, cache_root, executable, installed
from fake_anthropic import FakeAnthropic
from fake_endpoint import FakeEndpoint, Stream
from fake_gemini import FakeGemini
from fake_openai import FakeOpenAI
from fake_responses import FakeResponses
from hermes_home import make_home
from installs import may_download, unavailable

HELLO = "hello\n"  # what every agent's scripted tool call writes to hello.txt
FAST_AGENT_MODEL = "generic.fake-model"


@dataclass(frozen=True)
class Launch:
    """How to start one agent process: run `command` in `cwd` with exactly `env`."""

    command: list[str]
    env: dict[str, str]
    cwd: Path


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: nothing of ours (API keys, CI, proxies) reaches the agent."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "LANG": "C.UTF-8"}


def work_dir(root: Path) -> Path:
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    return work


# --- how each agent starts -------------------------------------------------------------------


def claude(root: Path, base_url: str) -> Launch:
    """Claude Code: the Messages API at ANTHROPIC_BASE_URL; as root it refuses to run without
    IS_SANDBOX=1; the DISABLE_* settings stop its other traffic (telemetry, updates)."""
    env = base_env(root / "home") | {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-0000",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return Launch([str(require("claude-agent-acp"))], env, work_dir(root))


CODEX_CONFIG = """\
model = "{model}"
model_provider = "fake"
approval_policy = "untrusted"
# Its sandbox needs bubblewrap and user namespaces, which test machines lack.
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
env_key = "CODEX_FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
# A cancelled turn's model stream stays open until the model sends more, or this long idle.
stream_idle_timeout_ms = 5000
"""


def codex(root: Path, base_url: str) -> Launch:
    """Codex: a model provider in $CODEX_HOME/config.toml speaking the Responses API (codex
    refuses `wire_api = "chat"`); the model must be one codex knows. It asks before any command
    that is not known to be safe (`untrusted`)."""
    codex_home = root / "codex-home"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(CODEX_CONFIG.format(model=fake_responses.MODEL, base_url=base_url))
    env = base_env(root / "home") | {"CODEX_HOME": str(codex_home), "CODEX_FAKE_API_KEY": "sk-test-0000"}
    return Launch([str(require("codex-acp"))], env, work_dir(root))


def gemini(root: Path, base_url: str) -> Launch:
    """Gemini CLI: the Gemini API at GOOGLE_GEMINI_BASE_URL; its settings turn off usage
    statistics and update checks."""
    home = root / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = base_env(home) | {"GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": "test-key-0000"}
    return Launch([str(require("gemini")), "--acp"], env, work_dir(root))


def fast_agent(root: Path, base_url: str) -> Launch:
    """fast-agent: Chat Completions at GENERIC_BASE_URL; with --shell it offers bash and file
    tools, and uses the client's fs (and terminal, when the client offers one)."""
    env = base_env(root / "home") | {"GENERIC_BASE_URL": base_url, "GENERIC_API_KEY": "sk-test-0000"}
    env["FAST_AGENT_MODEL"] = FAST_AGENT_MODEL  # for a command without --model (acp-server's preset)
    command = [str(require("fast-agent")), "acp", "--model", FAST_AGENT_MODEL, "--shell"]
    return Launch(command, env, work_dir(root))


def hermes(root: Path, base_url: str) -> Launch:
    """Hermes: a custom provider in $HERMES_HOME/config.yaml (tests/hermes_home.py's, with its
    environment probe and session titles off) and tirith, its command scanner, off.

    Hermes 0.19 cancels a model stream by shutting down the sockets of its httpx client's
    default transport, but its clients carry their connections in mounted transports, so a
    cancel that lands once the stream has stalled finds no socket (`tcp_force_closed=0`): the
    stream is dropped only when the model sends more or the read times out (120 s by default,
    the API timeout for a local endpoint). HERMES_STREAM_READ_TIMEOUT bounds that wait."""
    hermes_home = make_home(root, base_url)
    with (hermes_home / "config.yaml").open("a") as config:
        config.write("security:\n  tirith_enabled: false\n")
    env = base_env(root / "home") | {"HERMES_HOME": str(hermes_home), "HERMES_STREAM_READ_TIMEOUT": "5"}
    return Launch([str(require("hermes")), "acp"], env, work_dir(root))


# What installing them all costs (measured on a fresh cache): the npm agents 405 MB (Node.js >= 20),
# fast-agent with a Python 3.12 340 MB, Hermes 229 MB.
SIZES = "the real agents take about 1 GB"


def require(name: str) -> Path:
    """The agent's executable, installed on first use under CI or when opted in (the real
    agents take about 1 GB); skips with the reason (fails in CI)."""
    if not installed(name):
        may_download(f"the real agent {name} ({SIZES} under {cache_root()})")
    try:
        return executable(name)
    except InstallError as exc:
        unavailable(f"{name}: {exc}", node=name in NODE_AGENTS)


# --- what each agent's model says ------------------------------------------------------------


@dataclass(frozen=True)
class RealAgent:
    """One real agent and its fake: `say(text, hold_open=...)` is a streamed text answer,
    `write_hello(work)` an answer whose tool call writes HELLO to work/hello.txt and needs the
    user's permission, `is_tool_result(body)` tells a model request that carries its result."""

    name: str
    endpoint: Callable[[], FakeEndpoint]
    launch: Callable[[Path, str], Launch]
    say: Callable[..., Stream]
    write_hello: Callable[[Path], Stream]
    is_tool_result: Callable[[Any], bool]
    # What differs between agents (tests/test_agents_direct.py's docstring says more):
    writes_through_client: bool = False  # its file tool writes with fs/write_text_file
    writes_existing_files_only: bool = False  # its fs write fails on a file that is not there yet
    asks_for_unannounced_calls: bool = False  # its permission question names a call no tool_call announced
    leaves_calls_unfinished: bool = False  # a tool call it announced never reaches completed/failed
    schema_deviations: tuple[str, ...] = ()  # texts in the schema problems its frames are known to have
    after_cancel: Literal["answers", "ends_at_once"] = "answers"  # what the next prompt after a cancel gets
    between_lives: Callable[[Path], None] = lambda root: None  # done to its store before a restart (a bug's way round)


def _hello(work: Path) -> str:
    return str(work / "hello.txt")


def _claude_writes(work: Path) -> Stream:
    return fake_anthropic.reply(tools=[("Write", {"file_path": _hello(work), "content": HELLO})])


def _claude_sees_result(body: Any) -> bool:
    content = body["messages"][-1]["content"]  # a new prompt is appended to the tool result's message
    return isinstance(content, list) and content[-1]["type"] == "tool_result"


def _codex_writes(work: Path) -> Stream:
    # A pipe, not a redirection: acp-server offers "always allow" only for lines it can read
    # whole (codex's command reaches it as ["/bin/bash", "-lc", LINE]).
    return fake_responses.reply(tools=[("exec_command", {"cmd": "printf 'hello\\n' | tee hello.txt"})])


def _gemini_writes(work: Path) -> Stream:
    return fake_gemini.reply(calls=[("write_file", {"file_path": _hello(work), "content": HELLO})])


def _fast_agent_writes(work: Path) -> Stream:
    # An absolute path: fast-agent passes the model's path to fs/write_text_file unchanged.
    return fake_openai.reply(tools=[("write_text_file", {"path": _hello(work), "content": HELLO})])


def _hermes_writes(work: Path) -> Stream:
    return fake_openai.reply(tools=[("write_file", {"path": _hello(work), "content": HELLO})])


def _gemini_sessions_a_minute_old(root: Path) -> None:
    """Gemini CLI 0.61 names a session's file by the minute the session started and the first 8
    characters of its id, and `session/load` first starts a new file named for the minute it
    runs in: within the minute the session started that is the session's own file, whose
    history it resets, so the load fails ("No previous sessions found for this project"). A
    session started a minute or more before its load is found; the test moves the files there."""
    for chat in (root / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"):
        chat.rename(
            chat.with_name(re.sub(r"^session-\d{4}-\d\d-\d\dT\d\d-\d\d-", "session-2000-01-01T00-00-", chat.name))
        )


def _fast_agent_finishes_its_history_rotation(root: Path) -> None:
    """fast-agent 0.10 saves a session's history to a temporary file, then renames
    `history_agent.json` to `history_agent_previous.json` and the temporary file to
    `history_agent.json`. A SIGKILL between the two renames (it saves as a cancelled turn ends)
    leaves no `history_agent.json`, and `session/resume` then finds no history at all. The test
    makes the second rename, whose file was complete before the first."""
    for session in (work_dir(root) / ".fast-agent" / "sessions").glob("*"):
        for written in session.glob(".history_*.json.tmp.*"):
            current = session / written.name[1:].split(".tmp.")[0]
            if not current.exists():
                written.rename(current)


def _chat_sees_result(body: Any) -> bool:
    return body["messages"][-1]["role"] == "tool"


REAL_AGENTS = {
    agent.name: agent
    for agent in (
        RealAgent(
            name="claude",
            endpoint=FakeAnthropic,
            launch=claude,
            say=fake_anthropic.reply,
            write_hello=_claude_writes,
            is_tool_result=_claude_sees_result,
            after_cancel="ends_at_once",  # and its reply comes in the turn after it
            # usage_update's `used` is a required integer; claude-agent-acp sends null.
            schema_deviations=("{'sessionUpdate': 'usage_update', 'used': None,",),
        ),
        RealAgent(
            name="codex",
            endpoint=FakeResponses,
            launch=codex,
            say=fake_responses.reply,
            write_hello=_codex_writes,
            is_tool_result=lambda body: body["input"][-1].get("type") == "function_call_output",
            asks_for_unannounced_calls=True,  # exec_command: tool_call comes once approved
        ),
        RealAgent(
            name="gemini",
            endpoint=FakeGemini,
            launch=gemini,
            say=fake_gemini.reply,
            write_hello=_gemini_writes,
            is_tool_result=lambda body: "functionResponse" in body["contents"][-1]["parts"][-1],
            writes_through_client=True,
            writes_existing_files_only=True,
            asks_for_unannounced_calls=True,
            between_lives=_gemini_sessions_a_minute_old,
        ),
        RealAgent(
            name="fast-agent",
            endpoint=FakeOpenAI,
            launch=fast_agent,
            say=fake_openai.reply,
            write_hello=_fast_agent_writes,
            is_tool_result=_chat_sees_result,
            writes_through_client=True,
            between_lives=_fast_agent_finishes_its_history_rotation,
        ),
        RealAgent(
            name="hermes",
            endpoint=FakeOpenAI,
            launch=hermes,
            say=fake_openai.reply,
            write_hello=_hermes_writes,
            is_tool_result=_chat_sees_result,
            # write_file announces tc-..., asks as edit-approval-N, and never finishes tc-...
            asks_for_unannounced_calls=True,
            leaves_calls_unfinished=True,
        ),
    )
}
