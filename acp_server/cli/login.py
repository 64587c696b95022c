"""`acp-server login`: the sign-in of the agent below, run in this terminal as the agent runs it.

Editors run it as the terminal auth method acp-server offers for the agent's own
(`acp_server.downstream.login`): the editor starts acp-server's command with `ACP_SERVER_LOGIN`
set to the method, and this process becomes the agent's command with that method's arguments,
so the agent's exit status is the editor's answer. People run it by hand alike.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

EXIT_FAILED = 1


def add_command(commands: Any) -> None:
    login = commands.add_parser(
        "login",
        help="log in to the agent below (claude, codex ...) with its own sign-in, in this terminal",
        description="Asks the agent selected with --agent for its sign-in methods and runs the one that "
        "works in a terminal (METHOD names one when it has several) as the agent itself would. Editors "
        "offer it as the agent's log in.",
    )
    login.add_argument("method", nargs="?", metavar="METHOD", help="the agent's sign-in method id")


def run_login(args: argparse.Namespace, method: str | None) -> int:
    """Become the agent's command for its terminal sign-in `method`; 1 with a line that says why not."""
    from acp_server.cli.settings import agent_settings
    from acp_server.downstream.process import agent_environment
    from acp_server.downstream.runtime import AcpRuntime
    from adapters.base import AgentError
    from adapters.registry import create_adapter

    try:
        adapter = create_adapter(args.agent, **agent_settings(args))
    except (ValueError, OSError) as exc:
        print(f"acp-server login: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not isinstance(adapter, AcpRuntime):
        hint = "; its endpoint is set up with `acp-server setup`" if args.agent == "openai" else ""
        print(f"acp-server login: the {args.agent} agent has no sign-in of its own{hint}", file=sys.stderr)
        return EXIT_FAILED
    try:
        argv = adapter.login_command(method)
    except (AgentError, LookupError) as exc:
        print(f"acp-server login: {args.agent}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"acp-server login: running {shlex.join(argv)}", file=sys.stderr)
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, agent_environment())  # noqa: S606 - the agent's own command
    except OSError as exc:
        print(f"acp-server login: cannot run {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_FAILED
