"""The modes, options and commands an adapter offers a session of its own (`SessionControls`,
such as an ACP agent's below us): asked for before the session is answered, changed through
the adapter when the editor changes them, and shown to the editor when the adapter says they
changed. The same for every adapter: nothing here knows which agent it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from acp_server.acp.sessions import Session
from acp_server.protocol.results import AvailableCommand, CommandInput, wire
from acp_server.rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, RpcError
from adapters.base import (
    AgentError,
    AuthRequired,
    OffersControls,
    RuntimeAdapter,
    SessionControls,
    SessionNotes,
    TurnInput,
)

log = logging.getLogger(__name__)

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


class Controls:
    """`notify(session_id, update)` shows an update; `options(session)` is the session's full
    config option list as the editor is shown it; `commands` are the server's own."""

    def __init__(
        self,
        adapter: RuntimeAdapter,
        *,
        notify: Notify,
        options: Callable[[Session], list[dict[str, Any]]],
        live: Callable[[str], Session | None],
        commands: list[AvailableCommand],
    ) -> None:
        self.commands = commands
        self._notify = notify
        self._options = options
        self._live = live
        self._offering = adapter if isinstance(adapter, OffersControls) else None

    @property
    def offered(self) -> bool:
        return self._offering is not None

    async def offer(self, session: Session, ready: TurnInput) -> None:
        """Ask the adapter for the session's controls (it may open the session at its agent)."""
        if self._offering is not None:
            found = await _call(self._offering.session_controls, ready)
            session.controls = found if isinstance(found, SessionControls) else None

    async def set_mode(self, session: Session, mode_id: str) -> None:
        assert self._offering is not None  # only a session with controls of the adapter's gets here
        await self.show(
            session, await _call(self._offering.set_session_mode, session.id, mode_id), changed_by_editor=True
        )

    async def set_option(self, session: Session, option_id: str, value: str) -> None:
        assert self._offering is not None
        changed = await _call(self._offering.set_session_option, session.id, option_id, value)
        await self.show(session, changed, changed_by_editor=True)

    async def show(self, session: Session, controls: Any, *, changed_by_editor: bool = False) -> None:
        """Keep `controls` and tell the editor what changed (a change it made itself it knows,
        but not what followed from it, such as the mode an option set)."""
        before = session.controls or SessionControls()
        if not isinstance(controls, SessionControls):
            return
        session.controls = controls
        if controls.current_mode != before.current_mode and controls.current_mode is not None:
            await self._notify(
                session.id, {"sessionUpdate": "current_mode_update", "currentModeId": controls.current_mode}
            )
        if controls.config_options != before.config_options or (changed_by_editor and controls.modes):
            await self._notify(
                session.id, {"sessionUpdate": "config_option_update", "configOptions": self._options(session)}
            )
        if controls.commands != before.commands:
            await self._notify(session.id, commands_update(session, self.commands))

    async def late(self, session_id: str, controls: SessionControls) -> None:
        session = self._live(session_id)
        if session is not None:
            await self.show(session, controls)

    def notes(self, notes: SessionNotes, session_id: str) -> SessionNotes:
        """`notes`, which also carry the adapter's changes of the session's controls."""
        return _ControlNotes(notes, self, session_id)


def commands_update(session: Session, ours: list[AvailableCommand]) -> dict[str, Any]:
    """`available_commands_update`: the server's commands, then the agent's for the session."""
    taken = {command.name for command in ours}
    theirs = session.controls.commands if session.controls is not None else ()
    agent = [
        AvailableCommand(name=c.name, description=c.description, input=CommandInput(hint=c.hint) if c.hint else None)
        for c in theirs
        if c.name not in taken
    ]
    return {"sessionUpdate": "available_commands_update", "availableCommands": [wire(c) for c in [*ours, *agent]]}


async def _call(hook: Callable[..., Any], *args: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(hook, *args, abandon_on_cancel=True)
    except AuthRequired as exc:
        raise RpcError(AUTH_REQUIRED, str(exc) or "Authentication required") from None
    except AgentError as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


class _ControlNotes:
    """Notes from the adapter's threads, carried to the event loop they were made on."""

    def __init__(self, notes: SessionNotes, controls: Controls, session_id: str) -> None:
        self._notes, self._controls, self._session_id = notes, controls, session_id
        self._token = anyio.lowlevel.current_token()

    def title(self, title: str) -> None:
        self._notes.title(title)

    def controls(self, controls: SessionControls) -> None:
        try:
            anyio.from_thread.run(self._controls.late, self._session_id, controls, token=self._token)
        except RuntimeError:  # the event loop has stopped: the server is gone, and the editor with it
            log.debug("controls of session %s dropped: the server has stopped", self._session_id)
