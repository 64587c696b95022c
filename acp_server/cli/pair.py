"""`acp-server pair`: a token for a remote client of each listening runner, its web address and a
QR code (for a phone on the same network or tailnet); `--read-only` for a watcher's token;
`--revoke` ends every token given so far.

The runners mint the tokens over their control sockets (only the same user may connect), so a
token is never in an argv; it is printed here, to this user's terminal, and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

REVOKE_TIMEOUT = 10.0


def add_pair_command(commands: Any) -> None:
    pair = commands.add_parser(
        "pair",
        help="give a remote client (a browser, a phone, another editor) a token for a listening runner",
        description="Prints the runner's web address with a new token, and a QR code on a terminal. "
        "Start a listening runner first: acp-server runner start --listen 127.0.0.1:8765 [server options]. "
        "See docs/runner.md.",
    )
    pair.add_argument("--json", action="store_true", help='print {"url", "acp_url", "token"} (a list for several)')
    pair.add_argument(
        "--read-only",
        action="store_true",
        help="a token that may load, resume, list and watch sessions, but not prompt, cancel, answer or change them",
    )
    pair.add_argument("--revoke", action="store_true", help="end every token given so far (and their connections)")


def run_pair(args: argparse.Namespace) -> int:
    from acp_server.cli.runner import CONTROL_TIMEOUT, ask, controls

    if args.revoke:
        return _revoke()
    command = b"pair read-only" if args.read_only else b"pair"
    pairs: list[dict[str, Any]] = []
    for path in controls():
        status = ask(path, b"status", CONTROL_TIMEOUT)
        if status and status.get("listen"):
            answer = ask(path, command, CONTROL_TIMEOUT)
            if answer and "token" in answer:
                pairs.append(answer)
    if not pairs:
        print(
            "acp-server: no runner listens; start one with "
            "`acp-server runner start --listen 127.0.0.1:8765 [server options]`",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(pairs[0] if len(pairs) == 1 else pairs))
        return 0
    for pair in pairs:
        _show(pair, read_only=args.read_only)
    return 0


def _show(pair: dict[str, Any], *, read_only: bool) -> None:
    kind = "a read-only token (it may watch, never prompt, cancel or answer)" if read_only else "a token"
    print(f"Open this address on the other device ({kind}):\n\n  {pair['url']}\n")
    if sys.stdout.isatty():
        import segno

        segno.make(pair["url"], error="m").terminal(out=sys.stdout, compact=True)
    print(f"ACP endpoint: {pair['acp_url']}")
    print("  (send `Authorization: Bearer <token>`; the token is what follows #token= above)")


def _revoke() -> int:
    from acp_server.cli.runner import ask, controls
    from acp_server.runner.paths import data_dir
    from acp_server.runner.tokens import revoke_all

    closed = 0
    for path in controls():
        answer = ask(path, b"revoke", REVOKE_TIMEOUT)
        closed += int(answer.get("closed", 0)) if answer else 0
    revoke_all(data_dir())
    print(f"revoked every pairing token; closed {closed} remote connection(s)")
    return 0
