"""One acp-server session as the agent below knows it: its id there, the process generation it
lives in, the controls it offers, and the route of its traffic (`SessionRoute`).

During a turn the route puts the agent's updates and requests into the turn's link; between
turns (and while a session is being restored, when the agent replays what the editor has
already been shown from our journal) it keeps what concerns the session (modes, options,
commands, title) and drops the rest. All of it runs on the runtime's event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_server.downstream import controls as wire_controls
from acp_server.downstream.link import Ask, Inbox, Reply, Update, unanswerable
from acp_server.downstream.updates import SESSION_UPDATES
from adapters.base import NO_NOTES, ControlNotes, SessionControls, SessionNotes

log = logging.getLogger(__name__)

Json = dict[str, Any]


@dataclass(slots=True)
class AgentSession:
    """An acp-server session and its session at the agent (`theirs`, in process `generation`)."""

    ours: str
    cwd: str
    theirs: str | None = None
    agent: str = ""  # the agent's own name (initialize), which our journal keeps with the id
    generation: int = 0
    setup: Json = field(default_factory=dict[str, Any])  # the cwd, MCP servers, ... it was opened with
    controls: SessionControls = field(default_factory=SessionControls)
    notes: SessionNotes = NO_NOTES
    saved: str | None = None  # the agent session id last kept in our journal
    forgot: bool = False  # a new agent session stands in for one it could not restore: say so
    cancelled: bool = False  # the last prompt was cancelled
    turn: Inbox | None = None  # the running turn's link, from its start to its end
    inbox: Inbox | None = None  # where the agent's traffic goes: the turn it is answering
    prompting: anyio.Lock = field(default_factory=anyio.Lock)
    heard: anyio.Event = field(default_factory=anyio.Event)  # set by whatever the agent sends next


class SessionRoute:
    """The `Route` of one agent session (see module docstring)."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session

    async def update(self, update: Json) -> None:
        # Notes block until the server's loop has them: called in a thread, never on this loop.
        session, kind = self.session, update.get("sessionUpdate")
        session.heard.set()
        if kind in SESSION_UPDATES:
            session.controls = wire_controls.updated(session.controls, update)
            await anyio.to_thread.run_sync(tell_controls, session)
        elif session.inbox is not None and await session.inbox.put(Update(update)):
            return
        elif kind == "session_info_update" and isinstance(title := update.get("title"), str) and title:
            await anyio.to_thread.run_sync(session.notes.title, title)  # named after its turn (Hermes)

    async def ask(self, method: str, params: Json) -> Any:
        inbox, reply = self.session.inbox, Reply()
        if inbox is not None and await inbox.put(Ask(method, params, reply)):
            return await reply.wait()
        log.info("the agent asked %s with no turn running; refused", method)
        return unanswerable(method)


def tell_controls(session: AgentSession) -> None:
    """Show the editor the session's controls as they are now, if anyone listens."""
    if isinstance(session.notes, ControlNotes):
        session.notes.controls(session.controls)
