"""The prompt path of one connection: a turn waits its place in the session's queue, runs (the
adapter in a worker thread, or a built-in slash command), followed by the turns the agent asks
for (`Sink.follow_up`) while no other prompt waits, and every runtime event it makes passes
through `publish`, the one place that redacts it, journals it and maps it to a `session/update`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from acp_server.acp.commands import CommandContext, builtin_invocation, run_builtin
from acp_server.acp.options import effective_config
from acp_server.acp.sessions import Session, SessionStore
from acp_server.acp.unstable import SYSTEM_PROMPT, from_stored
from acp_server.protocol import methods
from acp_server.protocol.results import AvailableCommand, PromptResult, Usage
from acp_server.rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.turns.bridge import FollowUp
from acp_server.turns.client import ClientCapabilities
from acp_server.turns.mapping import MessageIds, live_updates, prompt_message_id, to_update, user_message_chunks
from acp_server.turns.placement import TerminalChoice
from acp_server.turns.policy import DEFAULT_MODE
from acp_server.turns.rich import RichReply, haui_on
from acp_server.turns.supervisor import (
    Publish,
    RunNumbering,
    Ticket,
    TurnOutcome,
    TurnTally,
    call_cancel_hook,
    run_turn,
)
from acp_server.turns.workers import Workers
from adapters.base import AdapterCapabilities, EditorFeatures, RuntimeAdapter, SessionNotes, TurnInput
from adapters.events import Envelope, PromptReceived, RuntimeEvent, TextDelta, TitleChanged, TurnFinished
from adapters.frozen import frozen
from journal.caps import RunCaps
from journal.redact import RunRedactor
from journal.states import RESPONSE_KINDS, RunState, final_state
from journal.store import Journal

if TYPE_CHECKING:
    from acp_server.turns.services import ClientTools

log = logging.getLogger(__name__)
Blocks = tuple[dict[str, Any], ...]
Echo = Callable[[str, dict[str, Any]], Awaitable[None]]
Started = Callable[[str], Awaitable[None]]
CLIENT_LEFT_ERROR = "the client closed the connection during the turn"


@frozen
class AgentOptions:
    max_workers: int = 8
    permission_timeout: float | None = None
    cancel_grace: float = 1.0
    terminal: TerminalChoice = "auto"  # where commands run: the editor's terminal or locally
    haui: bool = True  # draw HAUI fences as Markdown (`--haui`); a session may turn it off
    unstable: bool = False  # `--unstable`: ACP's unstable parts we implement (docs/protocol.md)
    # `--agent` and its settings, kept with each new session for `prompt --session` to continue it
    launch: Mapping[str, Any] = field(default_factory=dict[str, Any])


class _Notes(SessionNotes):
    """A session's notes from an agent's own threads, carried to the event loop they came from."""

    def __init__(self, prompts: Prompts, session_id: str) -> None:
        self._prompts, self._session_id = prompts, session_id
        self._token = anyio.lowlevel.current_token()

    def title(self, title: str) -> None:
        if not title.strip():
            return
        try:
            anyio.from_thread.run(self._prompts.late_title, self._session_id, title, token=self._token)
        except RuntimeError:  # the event loop has stopped: the server is gone, and the title with it
            log.debug("title for session %s dropped: the server has stopped", self._session_id)


class Prompts:
    """Runs the prompts of one connection; `client` reads the capabilities `initialize` gave."""

    def __init__(
        self,
        *,
        adapter: RuntimeAdapter,
        options: AgentOptions,
        journal: Journal | None,
        sessions: SessionStore,
        peer: Peer,
        client: Callable[[], ClientCapabilities],
        commands: list[AvailableCommand],
        set_mode: Callable[[Session, str], Awaitable[None]],
        workers: Workers,
        echo: Echo | None = None,
    ) -> None:
        self.adapter = adapter
        self.capabilities: AdapterCapabilities = adapter.capabilities()
        self.options = options
        self.journal = journal
        self.sessions = sessions
        self.peer = peer
        self._client = client
        self._commands = commands
        self._set_mode = set_mode
        self._workers = workers
        self._echo = echo  # a runner's: what the prompting editor knows, shown to the others
        self._client_left = False

    async def prompt(self, session: Session, blocks: Blocks, *, started: Started | None = None) -> PromptResult:
        """One `session/prompt`: wait behind earlier turns, run, then the follow-up turns the
        agent asks for (`Sink.follow_up`) while no other prompt waits; answer with the last
        turn's stop reason and the tokens of them all. `started` hears the run id as its turn
        starts (ACP v2 answers the prompt then)."""
        ticket = session.queue.enter()
        try:
            await ticket.wait()
            if ticket.cancelled:
                self._drop_follow_up(session)
                return PromptResult(stop_reason="cancelled")
            outcome = await self._run(session, blocks, ticket, started=started)
            spent = outcome.usage
            while outcome.stop_reason != "error" and (follow := self._next_follow_up(session, ticket)) is not None:
                outcome = await self._run(session, follow.prompt, ticket, origin=follow.origin)
                spent = _added(spent, outcome.usage)
        finally:
            session.queue.leave(ticket)
        if outcome.stop_reason == "error":
            code = AUTH_REQUIRED if outcome.auth_required else INTERNAL_ERROR  # the editor offers its log in
            raise RpcError(code, outcome.error or "The agent failed")
        usage = _usage(spent) if spent is not None else None
        return PromptResult(stop_reason="cancelled" if ticket.cancelled else outcome.stop_reason, usage=usage)

    def _next_follow_up(self, session: Session, ticket: Ticket) -> FollowUp | None:
        """The follow-up to run now, within this prompt. While another prompt waits it stays
        pending: that prompt goes first, and its turn asks again or not (a built-in command's
        leaves it, and it runs after it). A cancel drops it."""
        if ticket.cancelled:
            self._drop_follow_up(session)
            return None
        if session.queue.others_waiting():
            return None
        follow, session.follow_up = session.follow_up, None
        return follow

    def _drop_follow_up(self, session: Session) -> None:
        """A cancel drops the pending follow-up and tells the adapter, as a cancel of a turn would."""
        if session.follow_up is not None:
            session.follow_up = None
            call_cancel_hook(self.adapter, session.id)

    async def _run(
        self,
        session: Session,
        blocks: tuple[dict[str, Any], ...],
        ticket: Ticket,
        *,
        origin: str | None = None,
        started: Started | None = None,
    ) -> TurnOutcome:
        numbering = RunNumbering(f"run_{os.urandom(16).hex()}", session.id)
        if self.journal is not None:
            await self.journal.start_run(run_id=numbering.run_id, session_id=session.id)
        if started is not None:
            await started(numbering.run_id)
        tally = TurnTally()
        responded = False
        reply = RichReply(enabled=haui_on(session.config, self.options.haui))
        redactor = RunRedactor()
        caps = RunCaps()
        ids = MessageIds(numbering.run_id)

        async def publish(envelope: Envelope) -> None:
            nonlocal responded
            # Cut first: the tally, the journal and the editor all keep what the caps keep.
            if (event := caps.cap(envelope.event)) is None:
                return
            envelope = envelope if event is envelope.event else replace(envelope, event=event)
            responded = responded or event.kind in RESPONSE_KINDS
            tally.add(event)
            await self.publish(envelope, redactor=redactor, reply=reply, ids=ids)
            if isinstance(event, TurnFinished):
                await self._finish_run(envelope.run_id, event, responded=responded)

        history = await self.sessions.history(session)
        turn = TurnInput(
            session.id,
            session.cwd,
            blocks,
            tuple(history.messages),
            session.mode or DEFAULT_MODE,
            effective_config(self.capabilities, session.config),
            session.mcp_servers,
            session.additional_directories,
            history.transcript(),
            EditorFeatures(compaction=self._client().compaction, notices=self._client().notices),
            self.notes(session.id),
            origin,
            history.state(),
            system_prompt=from_stored(session.config.get(SYSTEM_PROMPT)),
        )
        if origin is None:
            await self.sessions.title_from_prompt(session, turn.text)
        if origin is None and (command := builtin_invocation(turn.text)) is not None:
            outcome = await self._run_builtin(session, blocks, command, numbering, publish)
        else:
            outcome = await run_turn(
                adapter=self.adapter,
                turn=turn,
                ticket=ticket,
                services=self._services(session, numbering, publish),
                publish=publish,
                numbering=numbering,
                workers=self._workers,
                grace=self.options.cancel_grace,
            )
            session.follow_up = outcome.follow_up  # the agent's latest turn decides
        history.add_turn(turn.text, "".join(tally.reply), tally.saves)
        return replace(outcome, usage=tally.usage())

    def connection_lost(self) -> None:
        """The client went away: turns that end from now on are recorded as `connection_lost`."""
        self._client_left = True

    async def _finish_run(self, run_id: str, event: TurnFinished, *, responded: bool) -> None:
        """Record how the run ended, after its `done` event, in the journal's run states."""
        if self.journal is None:
            return
        state = final_state(event.reason, responded=responded, client_left=self._client_left)
        error = event.message or (CLIENT_LEFT_ERROR if state is RunState.CONNECTION_LOST else None)
        await self.journal.finish_run(run_id, state, stop_reason=event.reason, error=error)

    def _services(self, session: Session, numbering: RunNumbering, publish: Publish) -> ClientTools:
        from acp_server.turns.services import ClientTools  # the editor-side services: loaded by the first turn

        async def emit(event: RuntimeEvent) -> None:
            await publish(numbering.envelope(event))

        return ClientTools(
            peer=self.peer,
            client=self._client(),
            session_id=session.id,
            cwd=session.cwd,
            roots=session.roots,
            permissions=session.permissions,
            emit=emit,
            mode=lambda: session.mode or DEFAULT_MODE,
            permission_timeout=self.options.permission_timeout,
            on_remember=lambda: self.sessions.save(session, permissions=dict(session.permissions.decisions)),
            terminal=self.options.terminal,
        )

    async def _run_builtin(
        self,
        session: Session,
        blocks: tuple[dict[str, Any], ...],
        command: tuple[str, str],
        numbering: RunNumbering,
        publish: Publish,
    ) -> TurnOutcome:
        """A built-in command is answered by the server, as a journaled turn of its own."""
        await publish(numbering.envelope(PromptReceived(blocks)))

        async def save_permissions() -> None:
            await self.sessions.save(session, permissions=dict(session.permissions.decisions))

        context = CommandContext(
            session_id=session.id,
            cwd=session.cwd,
            agent_name=self.adapter.name,
            mode=session.mode or DEFAULT_MODE,
            config=effective_config(self.capabilities, session.config),
            permissions=session.permissions.decisions,
            set_mode=lambda mode: self._set_mode(session, mode),
            save_permissions=save_permissions,
            commands=self._commands,
        )
        await publish(numbering.envelope(TextDelta(await run_builtin(*command, context))))
        await publish(numbering.envelope(TurnFinished("end_turn")))
        return TurnOutcome("end_turn")

    def notes(self, session_id: str) -> SessionNotes:
        """Where the adapter tells the session's editor what it learns outside a turn."""
        return _Notes(self, session_id)

    async def late_title(self, session_id: str, title: str) -> None:
        """A title the agent named after its turn: stored (redacted, cut) and shown; the journal's
        runs are left as they ended. Dropped once the session is closed."""
        session = self.sessions.live(session_id)
        if session is None:
            return
        update = to_update(TitleChanged(await self.sessions.retitle(session, title)))
        try:
            await self.peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        except PeerClosedError:
            log.info("the client left before session %s's title was shown", session_id)

    async def publish(
        self, envelope: Envelope, *, redactor: RunRedactor, reply: RichReply, ids: MessageIds | None = None
    ) -> None:
        """Every runtime event of every turn passes here, in order, and is redacted here once
        (`redactor`, the run's: a secret streamed in pieces is held back until it is whole), so
        the journal stores and the editor is shown the same text; each is journaled, then sent
        as `reply` shows it (HAUI fences drawn), its chunks with the run's message ids (`ids`)."""
        for redacted in redactor.envelopes(envelope):
            await self._publish_redacted(redacted, reply, ids)

    async def _publish_redacted(self, envelope: Envelope, reply: RichReply, ids: MessageIds | None) -> None:
        event = envelope.event
        if self.journal is not None:
            # Committed before the editor sees it: a crash never takes back what was shown, and
            # a tool never runs before its dispatched record is stored.
            await self.journal.append(envelope, durable=True, redacted=True)  # by `publish`'s redactor
            if isinstance(event, TitleChanged):
                await self.journal.update_session(envelope.session_id, title=event.title)
        for shown in reply.shown(event):
            for update in live_updates(shown, ids, plans=self.options.unstable and self._client().plan):
                await self.peer.notify(methods.SESSION_UPDATE, {"sessionId": envelope.session_id, "update": update})
        if self._echo is not None:
            for update in echoed_updates(envelope):
                await self._echo(methods.SESSION_UPDATE, {"sessionId": envelope.session_id, "update": update})


def echoed_updates(envelope: Envelope) -> list[dict[str, Any]]:
    """What the prompting editor knows without being told, for the others sharing the session:
    the prompt as its turn starts, and the turn's end (its answer tells only the prompting one)."""
    event = envelope.event
    if isinstance(event, PromptReceived) and event.origin is None:
        return user_message_chunks(event, prompt_message_id(envelope.run_id))
    if isinstance(event, TurnFinished):
        ended = {"runId": envelope.run_id, "stopReason": event.reason}
        return [{"sessionUpdate": "session_info_update", "_meta": {"acp-server": {"turnEnded": ended}}}]
    return []


def _added(first: dict[str, int] | None, second: dict[str, int] | None) -> dict[str, int] | None:
    """Two turns' `usage`, added up."""
    if first is None or second is None:
        return first or second
    return {key: first.get(key, 0) + second.get(key, 0) for key in first.keys() | second.keys()}


def _usage(tokens: dict[str, int]) -> Usage:
    """The prompt response's `usage` from a turn's tally (`TurnTally.usage`)."""
    return Usage(tokens["inputTokens"], tokens["outputTokens"], tokens["totalTokens"], tokens.get("cachedReadTokens"))
