"""`acp-server --remote HOST`: the server runs on HOST, where the project lives, as a runner-mode
front started over `ssh -T` (turns go on there when the link drops; the next connection
reattaches), and this process becomes that ssh. `setup` with `--remote` runs on HOST too.

The server options are spelled out as flags, each word quoted for the remote shell. On HOST a
small `sh` script finds the runner directory an ordinary login there uses (`/run/user/UID` when
ssh gave the command no XDG_RUNTIME_DIR), says in one line when acp-server is not there, and
execs it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys

from acp_server.cli.settings import SERVER_OPTIONS, agent_command_args

DEFAULT_SSH = "ssh"
DEFAULT_COMMAND = "acp-server"
LOCAL_ONLY = frozenset({"--remote", "--remote-command", "--ssh", "--runner"})  # not for the remote server
EXIT_NO_SSH = 127

# $0 is the host as the user named it; "$@" the command. An ssh command gets no XDG_RUNTIME_DIR
# without a PAM session, while logins on HOST have one: fronts started either way must meet at the
# same runner. `~/` at the start of --remote-command is the remote home (quoting keeps it literal).
REMOTE_SCRIPT = """\
if [ -z "${XDG_RUNTIME_DIR:-}" ] && [ -d "/run/user/$(id -u)" ] && [ -O "/run/user/$(id -u)" ]; then
  XDG_RUNTIME_DIR="/run/user/$(id -u)"; export XDG_RUNTIME_DIR
fi
case $1 in "~/"*) first="$HOME/${1#"~/"}"; shift; set -- "$first" "$@";; esac
if ! command -v "$1" >/dev/null 2>&1; then
  echo "acp-server: $1 is not on $0 (PATH there: $PATH); install acp-server on $0, or name it with --remote-command" >&2
  exit 127
fi
exec "$@"
"""


def ssh_argv(args: argparse.Namespace, command: list[str], *, terminal: bool = False) -> list[str]:
    """The local ssh command line running `command` (acp-server's arguments) on --remote's host."""
    host: str = args.remote
    program = [*shlex.split(args.remote_command or DEFAULT_COMMAND), *command]
    remote = shlex.join(["sh", "-c", REMOTE_SCRIPT, host, *program])
    if terminal:  # setup asks questions: a terminal there, and ssh may ask for a passphrase here
        return [*shlex.split(args.ssh or DEFAULT_SSH), "-t", "--", host, remote]
    # No ssh prompt can reach a person when an editor started us: fail at once instead of hanging.
    return [*shlex.split(args.ssh or DEFAULT_SSH), "-T", "-o", "BatchMode=yes", "--", host, remote]


def server_words(args: argparse.Namespace) -> list[str]:
    """The server options in effect (flags and ACP_SERVER_* alike) as flags for HOST, runner
    mode on unless turned off, and the agent's command after `--`."""
    words: list[str] = []
    for flag, spec in SERVER_OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if flag not in LOCAL_ONLY and value is not None and value != spec.get("default"):
            words += [flag, str(value)]
    runner = getattr(args, "runner", None)
    if runner is None or str(runner).strip().lower() in ("1", "true", "yes", "on"):
        words.append("--runner")
    return words + agent_command_args(args)


def run_remote(args: argparse.Namespace, command: list[str] | None = None, *, terminal: bool = False) -> int:
    """Become ssh to --remote's host, serving (or running `command`) there; returns only when
    ssh cannot be started."""
    argv = ssh_argv(args, server_words(args) if command is None else command, terminal=terminal)
    if shutil.which(argv[0]) is None:
        print(
            f"acp-server: --remote needs ssh, and {argv[0]!r} is not on PATH; install OpenSSH's client "
            "(or name the program with --ssh)",
            file=sys.stderr,
        )
        return EXIT_NO_SSH
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)  # noqa: S606 (a list of words, no shell here)
    except OSError as exc:
        print(f"acp-server: --remote cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_NO_SSH
