"""Live sessions of one connection: what a session is while the server holds it in memory."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from acp_server.errors import RESOURCE_NOT_FOUND, RpcError
from acp_server.tools import PermissionMemory
from acp_server.turns import TurnQueue
from adapters.base import Message


@dataclass(slots=True)
class Session:
    id: str
    cwd: str
    additional_directories: tuple[str, ...] = ()
    mcp_servers: tuple[dict[str, Any], ...] = ()
    mode: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    history: list[Message] = field(default_factory=list)
    queue: TurnQueue = field(default_factory=TurnQueue)
    permissions: PermissionMemory = field(default_factory=PermissionMemory)

    @property
    def roots(self) -> tuple[str, ...]:
        return (self.cwd, *self.additional_directories)


class SessionRegistry:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def create(self, *, cwd: str, mcp_servers: tuple[dict[str, Any], ...],
               additional_directories: tuple[str, ...] = ()) -> Session:
        session = Session(f"sess_{uuid.uuid4().hex}", cwd, additional_directories, mcp_servers)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, "Session not found", {"sessionId": session_id[:200]})
        return session

    def find(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def all(self) -> list[Session]:
        return list(self._sessions.values())
