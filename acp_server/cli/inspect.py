"""`acp-server sessions|show|runs|events|export`: reading the journal from a terminal.

Each command opens the same database the server uses (safe while servers are serving: SQLite
WAL readers never block writers) and prints a table, a transcript rendered exactly as a
loading editor would see it, or the raw event envelopes as JSON lines for other tools. A
session is named by its id or any unique prefix of it; a reader that stops early (`| head`)
ends the command quietly. What the journal holds came from models and agents: a table row is
printable on one line, and JSON strings are printable text (`adapters.printable`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_server.cli.settings import add_server_options
from acp_server.turns.replay import iso, replay_updates
from adapters.events import PromptReceived
from adapters.printable import printable, printable_json

if TYPE_CHECKING:  # the journal is imported when a command runs, not when the CLI parses
    from journal.records import EventRecord, SessionRecord
    from journal.store import Journal

EXIT_NOT_FOUND = 1
# The reader took what it wanted: not a failure of the command (as `show`, whose display
# discards what is left, and so `set -o pipefail` scripts go on).
EXIT_READER_GONE = 0
SESSION_ID_PREFIX = "sess_"  # may be left out of a prefix
RUN_ID_PREFIX = "run_"  # likewise
CANDIDATES_SHOWN = 5  # of an ambiguous prefix's matches
PAGE = 200
SESSIONS_HEADER = ("SESSION", "UPDATED", "AGENT", "LAST RUN", "TITLE [CWD]")
SESSIONS_ROW = "{:<37}  {:<16}  {:<10}  {:<17}  {}"


class NotFoundError(Exception):
    """No session or run answers to what the user typed; the message says so in one line."""


def add_commands(commands: Any) -> None:
    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help, description=help)
        # The server's options, `--db` among them, without defaults of their own: one given
        # before the command keeps its value unless given again after it.
        add_server_options(parser, defaults=False, shown=frozenset({"--db"}))
        return parser

    session = "a session id, or any unique prefix of one (with or without sess_)"
    listing = command("sessions", "list stored sessions, newest first")
    listing.add_argument("--cwd", help="only sessions of this working directory")
    listing.add_argument("--json", action="store_true", help="one JSON object per session")
    command("show", "print a session's transcript as an editor would show it").add_argument("session", help=session)
    runs = command("runs", "list a session's runs (turns) and how each ended")
    runs.add_argument("session", nargs="?", help=f"{session} (default: the latest session)")
    events = command("events", "print a run's raw event envelopes")
    events.add_argument("run", help="a run id, or any unique prefix of one (with or without run_)")
    events.add_argument("--after", type=int, default=None, help="only events after this seq")
    events.add_argument("--json", action="store_true", help="JSON lines (the default is a compact table)")
    export = command("export", "print a whole session (metadata, runs, events) as one JSON document")
    export.add_argument("session", help=session)
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

    path = args.db or str(default_path())
    if not os.path.exists(path):  # a reader creates nothing, least of all at a mistyped --db
        where = f"no journal at {os.path.abspath(path)} (check --db; a server creates it with its first session)"
        if args.command == "sessions":
            _warn(f"no sessions: {where}")
            return 0
        _warn(f"error: {where}")
        return EXIT_NOT_FOUND

    async def main() -> int:
        journal = await Journal.open(path)
        try:
            return await commands[args.command](journal, args)
        except NotFoundError as exc:
            _warn(f"error: {exc}")
            return EXIT_NOT_FOUND
        finally:
            await journal.close()

    try:
        status = anyio.run(main)
        sys.stdout.flush()  # here, not at exit: the reader may be gone before the last buffered line
    except BrokenPipeError:
        # Whatever is still buffered goes nowhere, so exiting does not fail on it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_READER_GONE
    return status


# --- finding what the user named -----------------------------------------------------------


async def find_session(journal: Journal, ident: str | None) -> SessionRecord:
    """The session `ident` names: its id, or a unique prefix of it; the latest one for None."""
    if ident is None:
        page, _ = await journal.list_sessions(limit=1)
        if not page:
            raise NotFoundError(f"no sessions in the journal {_shown(journal)}")
        return page[0]
    exact = await journal.get_session(ident)
    if exact is not None:
        return exact
    matches = [record async for record in _sessions_starting(journal, ident)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFoundError(f"no session {ident!r} in the journal {_shown(journal)} (acp-server sessions lists them)")
    shown = ", ".join(record.id for record in matches[:CANDIDATES_SHOWN])
    more = f" and {len(matches) - CANDIDATES_SHOWN} more" if len(matches) > CANDIDATES_SHOWN else ""
    raise NotFoundError(f"{ident!r} is the start of {len(matches)} sessions: {shown}{more}; give more of the id")


async def find_run(journal: Journal, ident: str) -> str:
    """The run `ident` names: its id, or a unique prefix of it (with or without run_)."""
    if await journal.get_run(ident) is not None:
        return ident
    matches: list[str] = []
    for prefix in dict.fromkeys((ident, RUN_ID_PREFIX + ident)):
        matches += await journal.run_ids_starting(prefix, limit=CANDIDATES_SHOWN + 1)
    matches = list(dict.fromkeys(matches))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        where = f"in the journal {_shown(journal)} (acp-server runs SESSION lists them)"
        raise NotFoundError(f"no run {ident!r} {where}")
    shown = ", ".join(matches[:CANDIDATES_SHOWN])
    more = " and more" if len(matches) > CANDIDATES_SHOWN else ""
    raise NotFoundError(f"{ident!r} is the start of several runs: {shown}{more}; give more of the id")


async def _sessions_starting(journal: Journal, prefix: str) -> AsyncIterator[SessionRecord]:
    cursor = None
    while True:
        page, cursor = await journal.list_sessions(cursor=cursor, limit=PAGE)
        for record in page:
            if record.id.startswith(prefix) or record.id.removeprefix(SESSION_ID_PREFIX).startswith(prefix):
                yield record
        if cursor is None:
            return


def _shown(journal: Journal) -> str:
    return os.path.abspath(journal.path)


# --- the commands --------------------------------------------------------------------------


async def _sessions(journal: Journal, args: argparse.Namespace) -> int:
    cursor, listed = None, 0
    while True:
        page, cursor = await journal.list_sessions(cwd=args.cwd, cursor=cursor, limit=PAGE)
        for record in page:
            runs = await journal.runs(record.id)
            last_run = runs[-1].status.value if runs else None
            if args.json:
                print(json.dumps(printable_json(_session_summary(record, last_run))))
            else:
                if not listed:
                    print(SESSIONS_ROW.format(*SESSIONS_HEADER))
                updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.updated_at))
                titled = f"{record.title or '(untitled)'}  [{record.cwd}]"
                # One line: a newline in a title would forge a row.
                _row(SESSIONS_ROW.format(record.id, updated, record.adapter, last_run or "-", titled))
            listed += 1
        if cursor is None:
            break
    if not listed:
        where = f" of {args.cwd}" if args.cwd else ""
        _warn(f"no sessions{where} in the journal {_shown(journal)}")
    return 0


def _session_summary(record: SessionRecord, last_run: str | None) -> dict[str, Any]:
    return {
        "sessionId": record.id,
        "cwd": record.cwd,
        "title": record.title,
        "updatedAt": iso(record.updated_at),
        "adapter": record.adapter,
        "lastRun": last_run,
    }


async def _show(journal: Journal, args: argparse.Namespace) -> int:
    from journal.states import RunState

    session = await find_session(journal, args.session)
    runs = {run.id: run for run in await journal.runs(session.id)}

    def interrupted(run_id: str) -> float | bool:
        run = runs.get(run_id)
        return False if run is None or run.status != RunState.INTERRUPTED else (run.ended_at or True)

    from acp_server.cli.display import Display  # difflib and all: only when a session is shown

    display = Display(sys.stdout, raw=False, color=sys.stdout.isatty())
    async for update in replay_updates(journal.events(session.id), interrupted):
        display.show({"sessionId": session.id, "update": update})
    display.finish()
    return 0


async def _runs(journal: Journal, args: argparse.Namespace) -> int:
    session = await find_session(journal, args.session)
    if args.session is None:
        _warn(f"runs of the latest session, {session.id} ({printable(session.title or 'untitled', one_line=True)})")
    for run in await journal.runs(session.id):
        ended = iso(run.ended_at)[:19] if run.ended_at else "-"
        origin = await _origin(journal, run.id)
        detail = (f"  follow-up ({origin})" if origin else "") + (f"  {run.error}" if run.error else "")
        _row(
            f"{run.id}  #{run.seq_no}  {run.status.value:<17} {iso(run.started_at)[:19]} -> {ended}  "
            f"{run.last_seq or 0} events{detail}"
        )
    return 0


async def _origin(journal: Journal, run_id: str) -> str | None:
    """What a follow-up run the agent asked for is for (its prompt's `origin`); None for the user's."""
    async for record in journal.events(run_id=run_id):
        return record.event.origin if isinstance(record.event, PromptReceived) else None
    return None


async def _events(journal: Journal, args: argparse.Namespace) -> int:
    run_id = await find_run(journal, args.run)
    async for record in journal.events(run_id=run_id, after=args.after):
        if args.json:
            print(json.dumps(printable_json(_envelope(record)), ensure_ascii=False))
        else:
            _row(
                f"{record.event_id}  {iso(record.created_at)[11:23]}  {record.type:<13} "
                f"{json.dumps(record.payload, ensure_ascii=False)[:100]}"
            )
    return 0


async def _export(journal: Journal, args: argparse.Namespace) -> int:
    session = await find_session(journal, args.session)
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
            for run in await journal.runs(session.id)
        ],
        "events": [_envelope(record) async for record in journal.events(session.id)],
    }
    json.dump(printable_json(document), sys.stdout, ensure_ascii=False, indent=2)
    print()
    return 0


def _envelope(record: EventRecord) -> dict[str, Any]:
    """An event as `events --json` and `export` print it: camelCase keys and ISO-8601 UTC times,
    as `sessions --json` and ACP have them; the payload as the journal stored it."""
    return {
        "eventId": record.event_id,
        "seq": record.seq,
        "runId": record.run_id,
        "sessionId": record.session_id,
        "type": record.type,
        "createdAt": iso(record.created_at),
        "terminal": record.terminal,
        "payload": record.payload,
    }


def _row(text: str) -> None:
    print(printable(text, one_line=True))


def _warn(message: str) -> None:
    print(printable(message), file=sys.stderr)
