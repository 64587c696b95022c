"""Sessions: the live ones held in memory, and the durable ones behind them in the journal.

A session known to the journal but not in memory (after a restart) is restored lazily on
first use, with its history, mode, config values and "always" permission answers. Without a
journal the server still works, with sessions that last as long as the process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acp_server.rpc.errors import RESOURCE_NOT_FOUND, RpcError
from acp_server.turns.bridge import FollowUp
from acp_server.turns.policy import PermissionMemory
from acp_server.turns.supervisor import TurnQueue
from adapters.base import SessionControls
from adapters.conversation import Conversation
from adapters.events import TranscriptSaved
from journal.redact import redact_text
from journal.store import Journal, SessionRecord

TITLE_CHARS = 80


@dataclass(slots=True)
class Session:
    id: str
    cwd: str
    additional_directories: tuple[str, ...] = ()
    mcp_servers: tuple[dict[str, Any], ...] = ()
    mode: str | None = None
    config: dict[str, Any] = field(default_factory=dict[str, Any])
    history: Conversation | None = field(default_factory=Conversation)  # None: still in the journal
    queue: TurnQueue = field(default_factory=TurnQueue)
    permissions: PermissionMemory = field(default_factory=PermissionMemory)
    title: str | None = None
    controls: SessionControls | None = None  # the adapter's own modes, options, commands (acp.controls)
    follow_up: FollowUp | None = None  # the turn the agent's latest turn asked for, not run yet (acp.prompting)

    @property
    def roots(self) -> tuple[str, ...]:
        return (self.cwd, *self.additional_directories)


def new_session_id() -> str:
    return f"sess_{os.urandom(16).hex()}"


def not_found(session_id: str) -> RpcError:
    return RpcError(RESOURCE_NOT_FOUND, "Session not found", {"sessionId": session_id[:200]})


class SessionStore:
    def __init__(self, journal: Journal | None, *, adapter_name: str, launch: Mapping[str, Any] | None = None) -> None:
        self.journal = journal
        self._adapter_name = adapter_name
        self._launch = dict(launch or {})
        self._live: dict[str, Session] = {}

    async def create(
        self, *, cwd: str, mcp_servers: tuple[dict[str, Any], ...], additional_directories: tuple[str, ...] = ()
    ) -> Session:
        session = Session(new_session_id(), cwd, additional_directories, mcp_servers)
        if self.journal is not None:
            now = time.time()
            await self.journal.create_session(
                SessionRecord(
                    id=session.id,
                    cwd=cwd,
                    adapter=self._adapter_name,
                    launch=self._launch,
                    additional_dirs=additional_directories,
                    created_at=now,
                    updated_at=now,
                )
            )
        self._live[session.id] = session
        return session

    async def fork(
        self,
        parent: Session,
        session_id: str,
        *,
        cwd: str,
        mcp_servers: tuple[dict[str, Any], ...],
        additional_directories: tuple[str, ...],
        config: dict[str, Any],
        transcript: TranscriptSaved | None = None,
    ) -> Session:
        """A new session whose journal holds copies of `parent`'s finished runs (journal.fork):
        its history is the parent's up to the last finished turn (then `transcript`, the agent's
        own fork). Mode, settings and title come along; "always" answers do not (a fork asks again)."""
        assert self.journal is not None  # session/fork is offered only with a journal
        record = await self.journal.get_session(parent.id)
        session = Session(session_id, cwd, additional_directories, mcp_servers, parent.mode, config, history=None)
        session.title = parent.title
        await self.journal.fork_session(
            parent.id,
            SessionRecord(
                id=session.id,
                cwd=cwd,
                title=parent.title,
                adapter=record.adapter if record else self._adapter_name,
                mode=parent.mode,
                config=config,
                additional_dirs=additional_directories,
                launch=record.launch if record else self._launch,
            ),
            transcript=transcript,
        )
        self._live[session.id] = session
        return session

    def live(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def all_live(self) -> list[Session]:
        return list(self._live.values())

    async def get(self, session_id: str, *, mcp_servers: tuple[dict[str, Any], ...] | None = None) -> Session:
        """The live session, restoring it from the journal when needed; -32002 if unknown."""
        session = self._live.get(session_id)
        if session is not None:
            if mcp_servers is not None:
                session.mcp_servers = mcp_servers
            return session
        record = await self.journal.get_session(session_id) if self.journal is not None else None
        if record is None:
            raise not_found(session_id)
        session = Session(
            record.id,
            record.cwd,
            tuple(record.additional_dirs),
            mcp_servers or (),
            record.mode,
            dict(record.config),
            history=None,
            permissions=PermissionMemory(dict(record.permissions)),
            title=record.title,
        )
        self._live[session_id] = session
        return session

    async def history(self, session: Session) -> Conversation:
        """The conversation so far; read from the journal on the first turn after a restore."""
        if session.history is None:
            session.history = await self.journal.history(session.id) if self.journal is not None else Conversation()
        return session.history

    def close(self, session_id: str) -> Session | None:
        """Drop the in-memory state, cancelling its turns; the journal keeps the session."""
        session = self._live.pop(session_id, None)
        if session is not None:
            session.queue.cancel_all()
        return session

    async def delete(self, session_id: str) -> Session | None:
        session = self.close(session_id)
        if self.journal is not None:
            await self.journal.delete_session(session_id)
        return session

    async def save(self, session: Session, **fields: Any) -> None:
        if self.journal is not None:
            await self.journal.update_session(session.id, **fields)

    async def title_from_prompt(self, session: Session, text: str) -> None:
        """A new session is titled by its first prompt until the agent names it."""
        if session.title is None and text.strip():
            await self.retitle(session, text)

    async def retitle(self, session: Session, text: str) -> str:
        """Store the first line of `text` (not blank) as the title, redacted and cut; returns it."""
        # Redacted before it is cut: a key cut in half no longer looks like one.
        first_line = redact_text(text.strip().splitlines()[0])
        session.title = first_line[:TITLE_CHARS] + ("…" if len(first_line) > TITLE_CHARS else "")
        await self.save(session, title=session.title)
        return session.title
