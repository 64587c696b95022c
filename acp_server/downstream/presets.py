"""The agents `--agent` names that are ACP agents: `acp` (the command after `--`) and the
presets, which start a known package with its documented command.

A preset's command is the first of its candidates whose program is installed, unless the
config file says otherwise (`[agents.NAME] command = [...]`, or a string split as a shell
would) or a command follows `--`. A missing program is no start-up error: the server answers
`initialize`, and `session/new` (and `doctor`) say in one line that the agent did not start,
why and how to install it, where an editor shows it. The registry points at these factories
by name: importing this module costs nothing until an ACP agent is asked for.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from acp_server.downstream.agent import AgentCommand
from acp_server.downstream.runtime import AcpRuntime
from adapters.configfile import config_path, read_config
from adapters.frozen import frozen
from adapters.openai.config import shorten_home

SECTION = "agents"


@frozen
class Preset:
    name: str
    candidates: tuple[tuple[str, ...], ...]  # the first whose program is installed is used
    install: str  # how to get it, for the message when none is

    def installed(self) -> bool:
        """Whether the agent's own program (not a package runner) is installed."""
        return shutil.which(self.candidates[0][0]) is not None


PRESETS: Mapping[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "claude",
            (("claude-agent-acp",), ("npx", "-y", "@zed-industries/claude-agent-acp")),
            "npm install -g @zed-industries/claude-agent-acp (Node.js), then sign in with `claude` once",
        ),
        Preset(
            "codex",
            (("codex-acp",), ("npx", "-y", "@zed-industries/codex-acp")),
            "npm install -g @zed-industries/codex-acp (Node.js), then sign in with `codex login` once",
        ),
        Preset("gemini", (("gemini", "--acp"),), "npm install -g @google/gemini-cli (Node.js)"),
        Preset(
            "fast-agent",
            (("fast-agent", "acp", "--shell"), ("uvx", "fast-agent-mcp", "acp", "--shell")),
            "uv tool install fast-agent-mcp (or pip install fast-agent-mcp)",
        ),
        Preset("hermes-acp", (("hermes", "acp"), ("hermes-acp",)), "pip install 'hermes-agent[acp]'"),
    )
}


def acp_agent(command: Sequence[str] | None = None) -> AcpRuntime:
    """`--agent acp -- COMMAND [ARGS...]`: any agent that speaks ACP on stdio."""
    if not command:
        raise ValueError(
            "the acp agent needs the agent's command after `--`: acp-server --agent acp -- COMMAND [ARGS...]"
        )
    return AcpRuntime(AgentCommand("acp", tuple(command)))


def preset_agent(name: str, command: Sequence[str] | None = None) -> AcpRuntime:
    """The preset `name`, with `command` (after `--`) or the config file's in place of its own."""
    preset = PRESETS[name]
    if command:
        return AcpRuntime(AgentCommand(name, tuple(command), install=preset.install))
    if chosen := configured(name):
        return AcpRuntime(AgentCommand(name, chosen, f"config file [{SECTION}.{name}]", preset.install))
    found = next((c for c in preset.candidates if shutil.which(c[0]) is not None), preset.candidates[0])
    return AcpRuntime(AgentCommand(name, found, "preset", preset.install))


def configured(name: str, env: Mapping[str, str] = os.environ) -> tuple[str, ...] | None:
    """`[agents.NAME] command` of the config file: a list of words, or a shell-like string."""
    path = config_path(env)
    raw = read_config(path)  # a ConfigFileError is a ValueError: said in one line at start-up
    if raw is None:
        return None
    try:
        data = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"config file {shorten_home(path)}: {exc}") from None
    section = _table(_table(data).get(SECTION)).get(name)
    if section is None:
        return None
    command = _table(section).get("command")
    if isinstance(command, str) and command.strip():
        return tuple(shlex.split(command))
    if isinstance(command, list) and command and all(isinstance(w, str) and w for w in cast(list[Any], command)):
        return tuple(cast(list[str], command))
    raise ValueError(
        f"config file {shorten_home(path)}: [{SECTION}.{name}] command must be a list of words or a command line"
    )


def _table(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _factory(name: str) -> Callable[..., AcpRuntime]:
    def make(command: Sequence[str] | None = None) -> AcpRuntime:
        return preset_agent(name, command)

    make.__name__ = make.__qualname__ = name.replace("-", "_")
    make.__doc__ = f"The {name} preset: {' '.join(PRESETS[name].candidates[0])}."
    return make


claude = _factory("claude")
codex = _factory("codex")
gemini = _factory("gemini")
fast_agent = _factory("fast-agent")
hermes_acp = _factory("hermes-acp")
