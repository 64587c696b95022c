"""A session's history as `session/load` sends it: each run's replay (turns.replay), taken from
the journal's per-run cache when it holds the run, else made from the run's events and cached.

A finished run replays the same every time: its events are final, and what they show depends
only on them, on how the run ended and on whether HAUI draws its fences. So its replay is kept
once (journal.cache) as the `update`s it sent, each encoded as the wire encodes it, one a line,
and a later load sends those lines as they are (`Peer.notify_raw`): nothing is decoded, mapped
or encoded again. The cache's variant names the HAUI switch and a digest of the code a replay
passes through, so no server replays a text another version of the code made. A running run,
or one whose replay is over `CACHE_MAX_CHARS`, is replayed from its events on every load.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_server.protocol import methods
from acp_server.rpc.outbox import encode
from acp_server.rpc.peer import Peer
from acp_server.turns.replay import RunReplay
from journal.records import RunRecord
from journal.states import RunState
from journal.store import Journal

log = logging.getLogger(__name__)

# Whatever shapes a replay: a change to any of these files makes every cached replay stale.
REPLAY_CODE = (
    "acp_server.acp.history",
    "acp_server.turns.replay",
    "acp_server.turns.mapping",
    "acp_server.turns.rich",
    "acp_server.haui",
    "acp_server.rpc.peer",
    "journal.codec",
    "adapters.events",
)
CACHE_MAX_CHARS = 1 << 20  # a run that replays to more is not cached: memory stays flat
WRITE_CHARS = 1 << 22  # replays made by this load, kept in one transaction once they reach this
WRITE_RUNS = 256  # or this many runs


@functools.cache
def replay_code_digest() -> str:
    """A digest of the source of `REPLAY_CODE` (each package's every module), read once."""
    digest = hashlib.sha256()
    for name in REPLAY_CODE:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        for path in sorted(origin.parent.glob("*.py")) if spec.submodule_search_locations else [origin]:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_variant(*, rich: bool, plans: bool = False) -> str:
    variant = f"{replay_code_digest()}:{'haui' if rich else 'plain'}"
    return f"{variant}:plans" if plans else variant  # a client that takes plan operations


def cut_off(run: RunRecord) -> float | bool:
    """False for a run that was not interrupted; else when it was found cut off (True: unknown)."""
    if run.status != RunState.INTERRUPTED:
        return False
    return run.ended_at if run.ended_at is not None else True


@dataclass(slots=True)
class _Made:
    """A run being replayed from its events: its updates' lines, while they may still be cached."""

    run: RunRecord
    replay: RunReplay
    lines: list[str] | None = field(default_factory=list[str])
    chars: int = 0
    last_seq: int | None = None


class History:
    """One load's history of one session, sent through `peer`. `seen` gets, for each run it
    showed, the last seq of that run it showed (the runner sends what came after)."""

    def __init__(
        self, journal: Journal, peer: Peer, session_id: str, *, rich: bool, seen: dict[str, int], plans: bool = False
    ) -> None:
        self._journal = journal
        self._peer = peer
        self._session_id = session_id
        self._rich = rich
        self._plans = plans
        self._variant = cache_variant(rich=rich, plans=plans)
        self._seen = seen
        self._prefix = f'{{"sessionId":{json.dumps(session_id)},"update":'
        self._writes: list[tuple[RunRecord, str]] = []
        self._write_chars = 0
        self._caching = True

    async def send(self) -> None:
        """Every run in order: a cached one as stored, runs in between from their events."""
        pending: list[RunRecord] = []
        async for entry in self._journal.cached_runs(self._session_id, self._variant):
            if entry.body is None:
                pending.append(entry.run)
                continue
            await self.send_runs(pending)
            pending = []
            for line in entry.body.split("\n"):
                await self._peer.notify_raw(methods.SESSION_UPDATE, f"{self._prefix}{line}}}")
            if entry.run.last_seq is not None:
                self._seen[entry.run.id] = entry.run.last_seq
        await self.send_runs(pending)

    async def send_runs(self, runs: list[RunRecord]) -> None:
        """Replay `runs` (consecutive runs of the session) from their events, caching the finished."""
        if not runs:
            return
        by_id = {run.id: run for run in runs}
        made: _Made | None = None
        async for page in self._journal.replay_pages(self._session_id, runs[0].seq_no, runs[-1].seq_no):
            for run_id, seq, event in page:
                if made is None or run_id != made.run.id:
                    if made is not None:
                        await self._end(made)
                    made = _Made(by_id[run_id], RunReplay(run_id, rich=self._rich, plans=self._plans))
                if updates := made.replay.feed(event):
                    await self._send(made, updates)
                made.last_seq = seq
        if made is not None:
            await self._end(made)
        await self._write()

    async def _send(self, made: _Made, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            line = encode(update)[:-1].decode()
            if made.lines is not None:
                made.lines.append(line)
                made.chars += len(line)
                if made.chars > CACHE_MAX_CHARS:
                    made.lines = None
            await self._peer.notify_raw(methods.SESSION_UPDATE, f"{self._prefix}{line}}}")

    async def _end(self, made: _Made) -> None:
        running = made.run.status is RunState.RUNNING
        await self._send(made, made.replay.end(cut_off(made.run), running=running))
        run = made.run
        if made.last_seq is not None:
            self._seen[run.id] = made.last_seq
        if made.lines and run.status is not RunState.RUNNING and made.last_seq == run.last_seq:
            self._writes.append((run, "\n".join(made.lines)))
            self._write_chars += made.chars
            if self._write_chars >= WRITE_CHARS or len(self._writes) >= WRITE_RUNS:
                await self._write()

    async def _write(self) -> None:
        """Keep the replays made so far; a journal that cannot take them only loads slower."""
        writes, self._writes, self._write_chars = self._writes, [], 0
        if not writes or not self._caching:
            return
        try:
            await self._journal.cache_runs(self._variant, writes)
        except sqlite3.Error as exc:
            self._caching = False
            log.warning("could not cache the replay of session %s (loads stay slower): %s", self._session_id, exc)
