"""`acp-server setup`: the openai agent's endpoint, API key and model, asked on a terminal and
saved in the `[openai]` table of the config file, mode 0600. Editors run it as the agent's
Terminal Auth method (`adapters.openai.setup`), so a user who installed acp-server from the ACP
Registry gets to a working agent without editing a file; people run it by hand alike.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

DEFAULT_BASE_URL = "https://api.openai.com/v1"
CHECK_TIMEOUT = 10.0  # seconds for the endpoint's model list
SHOWN_MODELS = 8
EXIT_ABORTED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
ENV_WINS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ACP_SERVER_MODEL")


def add_command(commands: Any) -> None:
    commands.add_parser(
        "setup",
        help="set up the openai agent: ask for an endpoint, API key and model, and save them",
        description="Asks on the terminal for an OpenAI-compatible endpoint, its API key (not shown as "
        "you type) and a model, checks that the endpoint answers, and saves them in the [openai] table "
        "of the config file (created readable by you alone). Editors offer it as the agent's sign-in.",
    )


@dataclass
class Answers:
    base_url: str
    api_key: str | None
    model: str | None


def run_setup(args: argparse.Namespace) -> int:
    from adapters.openai.config import config_path, load_settings, shorten_home
    from adapters.openai.setup import ConfigEditError, updated_config

    if getattr(args, "remote", None):
        from acp_server.cli.remote import run_remote

        return run_remote(args, ["setup"], terminal=True)  # the config file the remote server reads
    if getattr(args, "agent", "openai") != "openai":
        print(f"acp-server setup: it sets up the openai agent, not {args.agent}", file=sys.stderr)
        return EXIT_USAGE
    path = config_path(os.environ)
    shown = shorten_home(path)
    if not sys.stdin.isatty():
        print(
            f"acp-server setup: it asks its questions on a terminal; run it in one, or write {shown} "
            "yourself (or set OPENAI_BASE_URL and OPENAI_API_KEY)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        text = _read(path)
        updated_config(text, {})  # a file setup cannot edit stops it before any question
    except (OSError, ConfigEditError) as exc:
        print(f"acp-server setup: cannot update {shown}: {exc}", file=sys.stderr)
        return EXIT_ABORTED
    saved = load_settings(flags={}, env={}, config_file=path)  # the file alone, as setup edits it
    print(f"Setting up the openai agent of acp-server; the answers are saved in {shown}.")
    try:
        answers = _ask(saved.base_url, saved.api_key, saved.model)
    except KeyboardInterrupt:
        print("\nNothing saved.")
        return EXIT_INTERRUPTED
    except EOFError:
        print("\nNothing saved.")
        return EXIT_ABORTED
    try:
        _save(
            path,
            updated_config(text, {"base_url": answers.base_url, "api_key": answers.api_key, "model": answers.model}),
        )
    except (OSError, ConfigEditError) as exc:
        print(f"acp-server setup: cannot save {shown}: {exc}", file=sys.stderr)
        return EXIT_ABORTED
    print(f"Saved in {shown} (readable by you alone). The openai agent is ready.")
    for name in ENV_WINS:
        if os.environ.get(name):
            print(f"Note: {name} is set in this environment, and wins over the file.")
    return 0


def _ask(base_url: str, api_key: str | None, model: str | None) -> Answers:
    """The questions, asked again from the top when the endpoint does not answer and the user
    would rather fix it than save; each answer is the next round's default."""
    while True:
        base_url = _ask_url(base_url)
        api_key = _ask_key(api_key)
        listed, problem = _models(base_url, api_key)
        if problem is None:
            shown = ", ".join(listed[:SHOWN_MODELS]) + (", ..." if len(listed) > SHOWN_MODELS else "")
            print(f"The endpoint answered with {len(listed)} models{': ' + shown if shown else ''}.")
            return Answers(base_url, api_key, _ask_model(model or (listed[0] if listed else None)))
        print(f"The endpoint did not answer: {problem}")
        if _yes("Save these answers anyway? [y/N] "):
            return Answers(base_url, api_key, _ask_model(model))


def _ask_url(default: str | None) -> str:
    default = default or DEFAULT_BASE_URL
    while True:
        url = input(f"Endpoint, an OpenAI-compatible base URL [{default}]: ").strip() or default
        if url.startswith(("http://", "https://")):
            return url.rstrip("/")
        print("It must start with http:// or https://, such as http://localhost:11434/v1 for Ollama.")


def _ask_key(saved: str | None) -> str | None:
    from adapters.openai.config import mask_key

    keep = f"Enter keeps the saved one, {mask_key(saved)}" if saved else "Enter for none, as Ollama needs"
    key = getpass.getpass(f"API key (not shown as you type; {keep}): ").strip()
    return key or saved


def _ask_model(default: str | None) -> str | None:
    hint = f" [{default}]" if default else " (Enter: the endpoint's first listed)"
    return input(f"Model{hint}: ").strip() or default


def _yes(question: str) -> bool:
    return input(question).strip().lower() in ("y", "yes")


def _models(base_url: str, api_key: str | None) -> tuple[list[str], str | None]:
    """The endpoint's model ids, or why it could not list them, printable: the endpoint wrote them."""
    from adapters.base import AgentError
    from adapters.openai.client import Endpoint
    from adapters.printable import printable

    print(f"Asking {base_url} for its models...")
    endpoint = Endpoint(base_url, api_key, hint=None)  # no "set OPENAI_BASE_URL": that is what setup does
    try:
        listed = endpoint.list_models(timeout=CHECK_TIMEOUT)
        return [printable(str(entry["id"]), one_line=True) for entry in listed], None
    except AgentError as exc:
        return [], printable(str(exc))
    finally:
        endpoint.close()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _save(path: str, text: str) -> None:
    """Write `text` to `path` (through a symlink the user made, to its target) as a new file of
    mode 0600 renamed into place, so no reader ever sees half of it or a moment of a wider mode.
    A missing directory is created 0700."""
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=directory)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
