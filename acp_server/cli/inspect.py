"""`acp-server sessions|show|runs|events|export`: reading the journal from a terminal.

Each command opens the same database the server uses (safe while servers are serving: SQLite
WAL readers never block writers) and prints a table, a transcript rendered exactly as a
loading editor would see it, or the raw event envelopes as JSON lines for other tools.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_server.cli.display import Display
from acp_server.cli.settings import add_server_options
from acp_server.turns.replay import iso, replay_updates

if TYPE_CHECKING:  # the journal is imported when a command runs, not when the CLI parses
    from journal.records import EventRecord
    from journal.store import Journal

EXIT_NOT_FOUND = 1


def add_commands(commands: Any) -> None:
    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help, description=help)
        # The server's options, `--db` among them, without defaults of their own: one given
        # before the command keeps its value unless given again after it.
        add_server_options(parser, defaults=False)
        return parser

    listing = command("sessions", "list stored sessions, newest first")
    listing.add_argument("--cwd", help="only sessions of this working directory")
    listing.add_argument("--json", action="store_true", help="one JSON object per session")
    command("show", "print a session's transcript as an editor would show it").add_argument("session")
    command("runs", "list a session's runs (turns) and how each ended").add_argument("session")
    events = command("events", "print a run's raw event envelopes")
    events.add_argument("run")
    events.add_argument("--after", type=int, default=None, help="only events after this seq")
    events.add_argument("--json", action="store_true", help="JSON lines (the default is a compact table)")
    export = command("export", "print a whole session (metadata, runs, events) as one JSON document")
    export.add_argument("session")
    export.add_argument("--json", action="store_true", default=True, help="JSON output (the only format)")


def run_inspect_command(args: argparse.Namespace) -> int:
    commands: dict[str, Callable[[Journal, argparse.Namespace], Awaitable[int]]] = {
        "sessions": _sessions,
        "show": _show,
        "runs": _runs,
        "events": _events,
        "export": _export,
    }

    import anyio

    from journal.store import Journal, default_path

    async def main() -> int:
        journal = await Journal.open(args.db or default_path())
        try:
            return await commands[args.command](journal, args)
        finally:
            await journal.close()

    return anyio.run(main)


async def _sessions(journal: Journal, args: argparse.Namespace) -> int:
    cursor = None
    while True:
        page, cursor = await journal.list_sessions(cwd=args.cwd, cursor=cursor, limit=200)
        for record in page:
            if args.json:
                print(
                    json.dumps(
                        {
                            "sessionId": record.id,
                            "cwd": record.cwd,
                            "title": record.title,
                            "updatedAt": iso(record.updated_at),
                            "adapter": record.adapter,
                        }
                    )
                )
            else:
                print(f"{record.id}  {iso(record.updated_at)[:19]}  {record.title or '(untitled)'}  [{record.cwd}]")
        if cursor is None:
            return 0


async def _show(journal: Journal, args: argparse.Namespace) -> int:
    from journal.states import RunState

    if await journal.get_session(args.session) is None:
        return _not_found("session", args.session)
    runs = {run.id: run for run in await journal.runs(args.session)}

    def interrupted(run_id: str) -> float | bool:
        run = runs.get(run_id)
        return False if run is None or run.status != RunState.INTERRUPTED else (run.ended_at or True)

    display = Display(sys.stdout, raw=False, color=sys.stdout.isatty())
    async for update in replay_updates(journal.events(args.session), interrupted):
        display.show({"sessionId": args.session, "update": update})
    display.finish()
    return 0


async def _runs(journal: Journal, args: argparse.Namespace) -> int:
    if await journal.get_session(args.session) is None:
        return _not_found("session", args.session)
    for run in await journal.runs(args.session):
        ended = iso(run.ended_at)[:19] if run.ended_at else "-"
        detail = f"  {run.error}" if run.error else ""
        print(
            f"{run.id}  #{run.seq_no}  {run.status.value:<17} {iso(run.started_at)[:19]} -> {ended}  "
            f"{run.last_seq or 0} events{detail}"
        )
    return 0


async def _events(journal: Journal, args: argparse.Namespace) -> int:
    if await journal.get_run(args.run) is None:
        return _not_found("run", args.run)
    async for record in journal.events(run_id=args.run, after=args.after):
        if args.json:
            print(json.dumps(_envelope(record), ensure_ascii=False))
        else:
            print(
                f"{record.event_id}  {iso(record.created_at)[11:23]}  {record.type:<13} "
                f"{json.dumps(record.payload, ensure_ascii=False)[:100]}"
            )
    return 0


async def _export(journal: Journal, args: argparse.Namespace) -> int:
    session = await journal.get_session(args.session)
    if session is None:
        return _not_found("session", args.session)
    document = {
        "session": {
            "id": session.id,
            "cwd": session.cwd,
            "title": session.title,
            "adapter": session.adapter,
            "mode": session.mode,
            "config": session.config,
            "createdAt": iso(session.created_at),
            "updatedAt": iso(session.updated_at),
        },
        "runs": [
            {
                "id": run.id,
                "index": run.seq_no,
                "status": run.status.value,
                "stopReason": run.stop_reason,
                "error": run.error,
                "startedAt": iso(run.started_at),
                "endedAt": iso(run.ended_at) if run.ended_at else None,
            }
            for run in await journal.runs(args.session)
        ],
        "events": [_envelope(record) async for record in journal.events(args.session)],
    }
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2)
    print()
    return 0


def _envelope(record: EventRecord) -> dict[str, Any]:
    return {
        "event_id": record.event_id,
        "seq": record.seq,
        "run_id": record.run_id,
        "session_id": record.session_id,
        "type": record.type,
        "created_at": record.created_at,
        "terminal": record.terminal,
        "payload": record.payload,
    }


def _not_found(what: str, ident: str) -> int:
    print(f"error: no {what} {ident!r} in this journal", file=sys.stderr)
    return EXIT_NOT_FOUND
