"""The `acp-server` command: serve ACP over stdio, or act as a client with `prompt`.

Every server option can also be set with an `ACP_SERVER_*` environment variable; a flag wins
over the environment. Heavy imports happen only once a command needs them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from acp_server.cli.settings import (
    add_server_options,
    agent_settings,
    bare_switches,
    config_file_problem,
    launch,
    split_agent_command,
)

if TYPE_CHECKING:
    from acp_server.acp.prompting import AgentOptions
    from acp_server.rpc.trace import Trace
    from adapters.base import RuntimeAdapter

# Loggers that follow --log-level; every other logger (aiosqlite logs each statement at DEBUG,
# asyncio, httpx, httpcore, mcp ...) stays at WARNING unless named in --log-libraries.
OWN_LOGGERS = ("acp_server", "adapters", "journal")
ALL_LIBRARIES = frozenset({"all", "1", "true", "yes"})
# Libraries that keep a log of their own, keyed by a module only they have: their INFO and
# WARNING lines stay there (stderr gets their errors) unless --log-libraries names them, or the
# key (`hermes`: all of them). Hermes writes HERMES_HOME/logs/agent.log and errors.log; its
# packages are hermes-agent's top_level.txt, and a name as plain as `tools` is taken for Hermes'
# only once Hermes is loaded (one process has one top-level `tools`).
OWN_LOG_LIBRARIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "hermes": (
        "hermes_cli",
        (
            "acp_adapter", "agent", "batch_runner", "cli", "cron", "gateway", "hermes_bootstrap", "hermes_cli",
            "hermes_constants", "hermes_logging", "hermes_state", "hermes_time", "mcp_serve", "model_tools",
            "plugins", "providers", "run_agent", "tools", "toolset_distributions", "toolsets",
            "trajectory_compressor", "tui_gateway", "utils",
        ),
    ),
}  # fmt: skip
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EXIT_JOURNAL = 2  # the journal cannot be used: the message says which file, why and what to do
EXIT_USAGE = 2  # as argparse exits on a bad option
AGENT_COMMANDS = (None, "prompt", "doctor", "login")  # the commands that build an agent (None: serving)
TERMINAL_HINT = (
    "acp-server: serving ACP (JSON-RPC, one JSON object per line) on stdin/stdout, for an editor to start; "
    'to try it from a terminal, run acp-server prompt "hello" with the same options (Ctrl-D quits)'
)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line that says where the help is, not after the whole usage block
    (an editor shows the last lines of stderr; the block buries the error). Subcommands'
    parsers are of this class too (argparse makes them of their parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(*, commands: bool = True) -> argparse.ArgumentParser:
    """The whole command line; without `commands`, only the serving options (see `parse_arguments`)."""
    parser = OneLineParser(
        prog="acp-server",
        description="An Agent Client Protocol (ACP v1) agent server. Editors launch it and speak "
        "JSON-RPC over stdin/stdout, one JSON object per line. Run without a command to serve.",
        add_help=commands,
    )
    add_server_options(parser)
    if not commands:
        parser.set_defaults(command=None)
        return parser
    add_commands(parser)
    return parser


def parse_arguments(words: list[str]) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """The arguments, and the parser that read them. An editor's launch (options only, no command)
    is read without building the commands' parsers and importing their modules, about 10 ms of
    every start. Any word the options alone do not take (a command, --help, a typo) goes to the
    whole parser, so help, commands and errors are exactly its."""
    serving = build_parser(commands=False)
    args, rest = serving.parse_known_args(words)
    if not rest:
        return args, serving
    parser = build_parser()
    return parser.parse_args(words), parser


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    prompt = commands.add_parser(
        "prompt",
        help="send one prompt to a server started as a subprocess and print the reply",
        description="A real ACP client: starts acp-server over stdio (a front of the runner with --runner), "
        "opens a session (or loads a stored one, --session), sends the prompt and prints the streamed reply, "
        "thoughts and tool calls as they arrive.",
    )
    add_server_options(prompt, defaults=False)
    prompt.add_argument("text", help="the prompt")
    prompt.add_argument("--cwd", help="the new session's working directory (default: here)")
    prompt.add_argument(
        "--session",
        metavar="SESSION",
        help="continue this stored session (its id or a unique prefix, as `sessions` lists them): "
        "session/load, then the prompt",
    )
    _answer_flags(prompt)
    attach = commands.add_parser(
        "attach",
        help="show a session's running turn live until it ends",
        description="Shows the turn running in a session: its updates so far, then the rest live, until it "
        "ends (exit status as prompt's). A turn in a runner is resumed through the runner, which then asks "
        "this terminal its questions (the session leaves the editor that had it); any other is followed in "
        "the journal, read-only. Ctrl-C stops watching; the turn goes on.",
    )
    add_server_options(attach, defaults=False)
    attach.add_argument("session", metavar="SESSION", help="a session id, or any unique prefix of one")
    _answer_flags(attach)
    doctor = commands.add_parser(
        "doctor",
        help="check every registered agent and show the settings in effect",
        description="Prints each registered agent's health (2 s per check) and the settings in effect "
        "for the selected agent with where each came from; exits 1 only when the selected agent is unhealthy.",
    )
    add_server_options(doctor, defaults=False)
    from acp_server.cli.inspect import add_commands

    add_commands(commands)
    from acp_server.cli.runner import add_command as add_runner_command

    add_runner_command(commands)
    from acp_server.cli.pair import add_pair_command

    add_pair_command(commands)
    from acp_server.cli.setup import add_command as add_setup_command

    add_setup_command(commands)
    from acp_server.cli.login import add_command as add_login_command

    add_login_command(commands)


def _answer_flags(parser: argparse.ArgumentParser) -> None:
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--allow", action="store_true", help="allow every permission request (once)")
    answer.add_argument("--deny", action="store_true", help="reject every permission request (once)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the session/update payloads as JSON lines (terminal controls in strings shown visibly)",
    )


class LibraryLevels(logging.Filter):
    """The levels of the log, applied where records reach our handlers: our loggers and the named
    libraries at `level`, libraries with a log of their own at ERROR, every other at WARNING. On
    the handlers, not only on the loggers: a library may lower the root logger for handlers of its
    own (Hermes does, to INFO), which must bring no line of it or of anyone else to stderr."""

    def __init__(self, level: int, named: tuple[str, ...], *, everything: bool) -> None:
        super().__init__()
        self._level = level
        self._named = named
        self._everything = everything
        self._quiet = {key: packages for key, (_, packages) in OWN_LOG_LIBRARIES.items() if key not in named}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or (self._everything and record.levelno >= self._level):
            return True
        name = record.name
        if any(name == own or name.startswith(own + ".") for own in self._named):
            return record.levelno >= self._level
        top = name.partition(".")[0]
        for key, packages in self._quiet.items():
            if top in packages and OWN_LOG_LIBRARIES[key][0] in sys.modules:
                return False
        return record.levelno >= max(self._level, logging.WARNING)


class PrintableLines(logging.Formatter):
    """Log lines with nothing a terminal would act on: they quote agents' stderr, models' errors
    and titles, and land on a terminal (stderr) or in a file someone `tail`s. Lines and tracebacks
    keep their newlines; a stderr line of an agent is one line already."""

    def format(self, record: logging.LogRecord) -> str:
        from adapters.printable import printable

        return printable(super().format(record))


class RedactedRecords(logging.Filter):
    """Secrets out of every log line, on stderr and in --log-file: each record's message (its
    arguments filled in), traceback and stack, redacted as the journal is. The redactor loads
    with the first record, so a command that logs nothing never imports the journal package."""

    def filter(self, record: logging.LogRecord) -> bool:
        from journal.redact import redact_record

        redact_record(record)
        return True


def configure_logging(level: str, log_file: str | None, *, libraries: str | None = None, agent: str = "") -> None:
    """Our loggers (and a module:factory agent's) at `level`; the others at WARNING or above,
    unless `libraries` names them (comma-separated) or is "all"."""
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown level {level!r}")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        from journal.private import open_private_append

        # 0600, never through a symlink: the log names sessions, paths and tools.
        handlers.append(logging.StreamHandler(open(open_private_append(log_file), "a", encoding="utf-8")))  # noqa: SIM115
    raised = {name.strip() for name in (libraries or "").split(",") if name.strip()}
    everything = bool(raised & ALL_LIBRARIES)
    for key in raised & OWN_LOG_LIBRARIES.keys():
        raised |= {key, *OWN_LOG_LIBRARIES[key][1]}
    module = agent.partition(":")[0] if ":" in agent else ""
    named = (*OWN_LOGGERS, *([module.split(".")[0]] if module else []), *sorted(raised - ALL_LIBRARIES))
    root = numeric if everything else max(numeric, logging.WARNING)
    for handler in handlers:
        # The levels first: nothing that is dropped is redacted.
        handler.addFilter(LibraryLevels(numeric, named, everything=everything))
        handler.addFilter(RedactedRecords())
        handler.setFormatter(PrintableLines(LOG_FORMAT))
    logging.basicConfig(level=root, handlers=handlers)
    for name in named:
        logging.getLogger(name).setLevel(numeric)


def main(argv: Sequence[str] | None = None) -> int:
    ours, agent_command = split_agent_command(list(sys.argv[1:] if argv is None else argv))
    args, parser = parse_arguments(bare_switches(ours))
    args.agent_command = agent_command
    try:
        configure_logging(args.log_level, args.log_file, libraries=args.log_libraries, agent=args.agent)
    except (ValueError, OSError) as exc:
        parser.error(f"--log-level/--log-file: {exc}")
    problem = config_file_problem(os.environ) if args.command in AGENT_COMMANDS else None
    if problem is not None:
        print(f"acp-server: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _command(args, parser, argv)
    except Exception as exc:
        from journal.errors import JournalError  # here, not at start-up: importing journal is slow

        if not isinstance(exc, JournalError):
            raise
        # At start-up; while serving, the handlers answer the editor with it and serve on.
        print(f"acp-server: {exc}", file=sys.stderr)
        return EXIT_JOURNAL


def _command(args: argparse.Namespace, parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    from acp_server.downstream.login import LOGIN_ENV  # an editor running the agent's terminal sign-in sets it

    if args.command == "login" or (args.command is None and os.environ.get(LOGIN_ENV)):
        from acp_server.cli.login import run_login

        return run_login(args, getattr(args, "method", None) or os.environ.get(LOGIN_ENV))
    if args.command == "prompt":
        from acp_server.cli.prompt import run_prompt_command
        from acp_server.cli.settings import flags_given
        from adapters.registry import check_name

        try:
            check_name(args.agent)  # here, in one line, not from the server it would start
        except ValueError as exc:
            parser.error(str(exc))
        # `--session` continues with the session's agent: what the command line said outright wins.
        args.flags = flags_given(sys.argv[1:] if argv is None else argv, "prompt")

        return run_prompt_command(args)
    if args.command == "doctor":
        from acp_server.cli.doctor import run_doctor

        return run_doctor(args, sys.argv[1:] if argv is None else argv)
    if args.command == "setup":
        from acp_server.cli.setup import run_setup

        return run_setup(args)
    if args.command == "attach":
        from acp_server.cli.attach import run_attach_command

        return run_attach_command(args)
    if args.command == "pair":
        from acp_server.cli.pair import run_pair

        return run_pair(args)
    if args.command == "runner":
        from acp_server.cli.runner import run_runner_command

        return run_runner_command(args, parser, build=lambda: _build(args, parser))
    if args.command is not None:
        from acp_server.cli.inspect import run_inspect_command

        return run_inspect_command(args)
    return _serve(args, parser)


def _serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from acp_server.cli.runner import run_front, runner_on

    if args.remote:
        from acp_server.cli.remote import run_remote

        _hint_at_a_terminal()
        return run_remote(args)  # ssh to the host's runner takes this process's place
    if runner_on(args):
        _hint_at_a_terminal()
        return run_front(args, parser)  # a thin front: the runner builds the agent
    if args.listen:
        print(
            "acp-server: --listen (ACP_SERVER_LISTEN) needs runner mode (--runner); serving stdio only", file=sys.stderr
        )
    import anyio

    from acp_server.acp.handlers import AcpAgent
    from acp_server.acp.server import serve_stdio

    adapter, options = _build(args, parser)
    trace = _open_trace(args.trace, parser)
    _hint_at_a_terminal()

    async def serve() -> None:
        from journal.store import Journal, default_path

        journal = await Journal.open(args.db or default_path())
        try:
            agent = AcpAgent(adapter, options, journal=journal)
            await serve_stdio(agent, max_frame_bytes=args.max_frame_bytes, trace=trace)
        finally:
            await journal.close()

    try:
        anyio.run(serve)
    finally:
        if trace is not None:
            trace.close()
    return 0


def _hint_at_a_terminal() -> None:
    if sys.stdin.isatty():  # a person started the bare server (editors give it a pipe): say what it waits for
        print(TERMINAL_HINT, file=sys.stderr, flush=True)


def _build(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[RuntimeAdapter, AgentOptions]:
    """The adapter and the options of a server, after checking them (an error exits)."""
    from acp_server.acp.handlers import AgentOptions
    from acp_server.turns.placement import TERMINAL_CHOICES, terminal_choice
    from adapters.registry import create_adapter

    try:
        adapter = create_adapter(args.agent, **agent_settings(args))
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    if args.max_workers < 1:
        parser.error("--max-workers must be at least 1")
    if args.max_frame_bytes < 1024:
        parser.error("--max-frame-bytes must be at least 1024")
    if args.permission_timeout is not None and args.permission_timeout <= 0:
        parser.error("--permission-timeout must be a positive number of seconds")
    terminal = terminal_choice(args.terminal)
    if terminal is None:
        parser.error(f"--terminal must be {', '.join(TERMINAL_CHOICES[:-1])} or {TERMINAL_CHOICES[-1]}")
    if args.haui not in ("on", "off"):
        parser.error("--haui must be on or off")
    options = AgentOptions(
        max_workers=args.max_workers,
        permission_timeout=args.permission_timeout,
        terminal=terminal,
        haui=args.haui == "on",
        unstable=args.unstable == "1",
        launch=launch(args),
    )
    return adapter, options


def _open_trace(path: str | None, parser: argparse.ArgumentParser) -> Trace | None:
    """The wire trace, redacted as the journal is (the rpc layer is given the redactor)."""
    if not path:
        return None
    from acp_server.rpc.trace import Trace
    from journal.redact import redact, redact_text

    try:
        return Trace.open(path, redact=redact, redact_text=redact_text)
    except OSError as exc:
        parser.error(f"--trace: cannot append to {path}: {exc.strerror or exc}")
