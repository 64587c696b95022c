"""The server's option table, shared by `acp-server` itself, `prompt` (which starts a server) and
`doctor` (which shows where each setting came from). A flag wins over its `ACP_SERVER_*`
environment variable. Help names the agents the registry knows, looked up only when shown.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, cast

ENV_PREFIX = "ACP_SERVER_"
CONFIG_ENV = "ACP_SERVER_CONFIG"  # the config file's path (adapters/openai/config.py reads it)
AGENT_NAMES = "{agent names}"  # filled in by HelpFormatter: parsing never imports the registry
SOURCES = (
    "The openai agent's endpoint is --base-url, else OPENAI_BASE_URL, else base_url in the config file; "
    f"its key is OPENAI_API_KEY, else api_key there. The config file (an [openai] table) is ${CONFIG_ENV}, "
    "else ~/.config/acp-server/config.toml (in $XDG_CONFIG_HOME when set). "
    "`acp-server doctor` shows each setting in effect and where it came from."
)
HIDDEN = "The other server options are taken too (as before the command); acp-server --help lists them."

if TYPE_CHECKING:  # for the checker only: `--help` does not pay for building the class
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Required, TypedDict

    class OptionSpec(TypedDict, total=False):
        """The keyword arguments of `add_argument` an option sets."""

        help: Required[str]
        default: Any
        type: Callable[[str], Any]
        nargs: str
        const: Any
        metavar: str


SWITCH_ON = frozenset({"1", "true", "yes", "on"})
SWITCH_OFF = frozenset({"0", "false", "no", "off"})
SWITCHES = ("--runner", "--unstable")  # flags whose value is optional: on by themselves


def switch(value: str) -> str:
    """A switch's value, "1" or "0"; anything else is an error, not a quiet "off"."""
    word = value.strip().lower()
    if word in SWITCH_ON | SWITCH_OFF:
        return "1" if word in SWITCH_ON else "0"
    raise argparse.ArgumentTypeError(f"expected 1 or 0 (or on/off, yes/no, true/false), not {value!r}")


def bare_switches(argv: list[str]) -> list[str]:
    """A switch not followed by one of its words (`--runner "the prompt's text"`, `--runner
    sessions`) is `--runner=1`, so that it never takes the next word for its value."""
    words = SWITCH_ON | SWITCH_OFF
    return [
        f"{word}=1" if word in SWITCHES and (at + 1 == len(argv) or argv[at + 1].strip().lower() not in words) else word
        for at, word in enumerate(argv)
    ]


SERVER_OPTIONS: list[tuple[str, OptionSpec]] = [
    (
        "--agent",
        {
            "help": f"agent to serve: {AGENT_NAMES}, or module:factory (default: openai)",
            "default": "openai",
        },
    ),
    (
        "--model",
        {
            "help": "model for the openai agent (default: from the environment, the config file, or the "
            "endpoint's first model)"
        },
    ),
    (
        "--base-url",
        {
            "help": "the openai agent's endpoint, an OpenAI-compatible URL such as http://localhost:11434/v1 "
            "(default: OPENAI_BASE_URL, else base_url in the config file, else OpenAI's)"
        },
    ),
    (
        "--script",
        {
            "help": "the scripted agent's scenario file (format in docs/agents/scripted.md), "
            "or the python agent's module:function"
        },
    ),
    ("--db", {"help": "SQLite journal of sessions and runs (default: journal.db in the user data directory)"}),
    (
        "--log-level",
        {"help": "DEBUG, INFO, WARNING or ERROR (default: WARNING); logs go to stderr", "default": "WARNING"},
    ),
    ("--log-file", {"help": "also write the log to this file"}),
    (
        "--log-libraries",
        {
            "help": "also log these other loggers at --log-level, comma-separated (e.g. httpx,mcp), or all "
            "(1, the default with no value); otherwise only acp-server's own and a module:factory agent's "
            "go below WARNING",
            "nargs": "?",
            "const": "all",
        },
    ),
    (
        "--trace",
        {"help": "append every JSON-RPC frame, both directions, to this file as JSON lines (secrets redacted)"},
    ),
    (
        "--max-workers",
        {"help": "agent turns that may run at once, each in a worker thread (default: 8)", "type": int, "default": 8},
    ),
    (
        "--permission-timeout",
        {
            "help": "seconds to wait for a permission answer before denying "
            "(default: wait as long as the editor takes)",
            "type": float,
        },
    ),
    (
        "--terminal",
        {
            "help": "where commands run: auto (the editor's terminal when it offers one, else locally), "
            "editor (only there; commands fail when it offers none) or local (default: auto)",
            "default": "auto",
        },
    ),
    (
        "--haui",
        {
            "help": "draw the HAUI blocks (```hermes-ui fences) of agent replies as Markdown: on or off "
            "(off passes them through untouched; a session can also turn it off) (default: on)",
            "default": "on",
        },
    ),
    (
        "--unstable",
        {
            "help": "also speak ACP's unstable parts that acp-server implements (session/fork, a client's "
            "systemPrompt, plan operations); off, the wire is stable ACP v1 only (1 with no value; 0 turns it off)",
            "nargs": "?",
            "const": "1",
            "type": switch,
        },
    ),
    (
        "--max-frame-bytes",
        {"help": "longest accepted input line in bytes (default: 64 MiB)", "type": int, "default": 64 << 20},
    ),
    (
        "--runner",
        {
            "help": "runner mode: relay to a per-user background runner (started when none runs) that keeps "
            "turns going when the editor goes away (1 with no value; 0 turns it off)",
            "nargs": "?",
            "const": "1",
            "type": switch,
        },
    ),
    (
        "--remote",
        {
            "help": "run the server on HOST (or USER@HOST), where the project lives, in runner mode over "
            "`ssh -T`; the editor's files stay the editor's (see docs/runner.md)",
            "metavar": "HOST",
        },
    ),
    (
        "--remote-command",
        {"help": "acp-server's command on the --remote host (default: acp-server)", "metavar": "COMMAND"},
    ),
    (
        "--ssh",
        {"help": "the ssh command --remote runs, with any options of yours (default: ssh)", "metavar": "COMMAND"},
    ),
    (
        "--runner-idle",
        {
            "help": "runner mode: seconds a runner with no connection and no live turn stays (default: 600)",
            "type": float,
            "default": 600.0,
        },
    ),
    (
        "--listen",
        {
            "help": "runner mode: the runner also serves ACP to remote clients at http://HOST:PORT/acp "
            "(WebSocket and Streamable HTTP; loopback unless TLS is on; see docs/runner.md)",
            "metavar": "HOST:PORT",
        },
    ),
    ("--tls-cert", {"help": "runner mode: the certificate (PEM) --listen serves TLS with", "metavar": "FILE"}),
    ("--tls-key", {"help": "runner mode: the private key (PEM) of --tls-cert", "metavar": "FILE"}),
    (
        "--detached-wait",
        {
            "help": "runner mode: seconds a question waits for an editor to attach before it fails closed "
            "(default: 600)",
            "type": float,
            "default": 600.0,
        },
    ),
]


class HelpFormatter(argparse.HelpFormatter):
    """Names the registered agents where a help text says AGENT_NAMES."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return text.replace(AGENT_NAMES, _agent_names()) if text and AGENT_NAMES in text else text


def _agent_names() -> str:
    from adapters.registry import agent_specs

    specs = agent_specs()  # what ships with acp-server (built-ins, presets), then entry points
    installed = [spec.name for spec in specs if spec.origin.startswith("entry point")]
    builtins = [spec.name for spec in specs if spec.name not in installed]
    named = f"an installed agent ({', '.join(installed)})" if installed else "an installed agent's name"
    return f"a built-in ({', '.join(builtins)}), {named}"


def config_file_problem(environ: Mapping[str, str]) -> str | None:
    """Why the config file cannot be used: ACP_SERVER_CONFIG names a file that does not exist (the
    openai agent would take it for an empty one), or the file is no regular file of the user's own
    of sane size (`adapters/configfile.py`). Bad TOML is the agent's to report."""
    from adapters.configfile import ConfigFileError, config_path, read_config

    path = environ.get(CONFIG_ENV)
    if path and not os.path.exists(path):
        return f"{CONFIG_ENV} names the config file {path}, which does not exist; create it, or unset {CONFIG_ENV}"
    try:
        read_config(config_path(environ))
    except ConfigFileError as exc:
        return str(exc)
    return None


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_server_options(
    parser: argparse.ArgumentParser, *, defaults: bool = True, shown: frozenset[str] | None = None
) -> None:
    """Without `defaults`, an option left out keeps the value given before the subcommand.
    The parser's help gets the agents' names (`HelpFormatter`) and where the endpoint comes from.
    With `shown`, the help lists only those flags (a journal command takes the rest, and says
    where they are listed), not all the server's."""
    parser.formatter_class = HelpFormatter
    title = "server options (each also settable as ACP_SERVER_<NAME>)"
    group = parser.add_argument_group(title, SOURCES if shown is None else HIDDEN)
    for flag, spec in SERVER_OPTIONS:
        spec = spec.copy()
        env = os.environ.get(env_name(flag))
        if not defaults:
            spec["default"] = argparse.SUPPRESS
        elif env is not None:
            spec["default"] = env  # argparse converts (and reports a bad value) like a flag's
        spec["help"] = f"{spec['help']} [env {env_name(flag)}]"
        if shown is not None and flag not in shown:
            spec["help"] = argparse.SUPPRESS
        group.add_argument(flag, **spec)


def server_args(args: argparse.Namespace) -> list[str]:
    """The server options of `args` as command-line flags, to start a server subprocess (the
    agent's command after `--` last)."""
    argv: list[str] = []
    for flag, spec in SERVER_OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None and value != spec.get("default"):
            argv += [flag, str(value)]
    return argv + agent_command_args(args)


def split_agent_command(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """`acp-server [options] --agent acp -- COMMAND [ARGS...]`: the options, and the agent's
    command (everything after the first `--`, which is not ours to parse)."""
    if "--" not in argv:
        return argv, ()
    at = argv.index("--")
    return argv[:at], tuple(argv[at + 1 :])


def agent_command_args(args: argparse.Namespace) -> list[str]:
    command: tuple[str, ...] = getattr(args, "agent_command", ())
    return ["--", *command] if command else []


def flags_given(argv: Sequence[str], command: str) -> set[str]:
    """The server options given as flags (before or after `command`), by their dest names."""
    parser = argparse.ArgumentParser(add_help=False)
    add_server_options(parser, defaults=False)
    commands = parser.add_subparsers(dest="command")
    add_server_options(commands.add_parser(command, add_help=False), defaults=False)
    given, _ = parser.parse_known_args(split_agent_command(list(argv))[0])
    return set(vars(given)) - {"command"}


def launch(args: argparse.Namespace) -> dict[str, object]:
    """`--agent` and the settings given to it, as kept with each new session so that `prompt
    --session` continues it with the same agent (a script file as an absolute path: the next
    prompt may be run elsewhere)."""
    settings = {key: value for key, value in agent_settings(args).items() if value is not None}
    script = settings.get("script")
    if isinstance(script, str) and os.path.isfile(script):
        settings["script"] = os.path.abspath(script)
    if "command" in settings:
        settings["command"] = list(cast(tuple[str, ...], settings["command"]))
    return {"agent": args.agent, **settings}


def agent_settings(args: argparse.Namespace) -> dict[str, object]:
    """The server options an agent's factory may take (unset ones are left out by the registry)."""
    command = getattr(args, "agent_command", ()) or None
    return {"script": args.script, "model": args.model, "base_url": args.base_url, "command": command}
