"""The ACP surface: one handler per method, over a JSON-RPC peer; knows nothing of SQLite.

It keeps the client's capabilities for the connection and gates every client call on them,
advertises exactly what the adapter can do, and hands prompts to `acp.prompting`, where every
runtime event of a turn is journaled and mapped to a `session/update`. The start-up path
(`initialize`, `session/new`) loads no pydantic; the other handlers import their params' models
as they first run (docs/performance.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

import acp_server
from acp_server.acp.commands import available_commands
from acp_server.acp.controls import Controls, commands_update
from acp_server.acp.options import (
    MODE_OPTION,
    agent_modes,
    agent_option,
    check_mode,
    check_value,
    config_options,
    modes_state,
)
from acp_server.acp.prompting import AgentOptions, Echo, Prompts
from acp_server.acp.sessions import Session, SessionStore, new_session_id
from acp_server.acp.unstable import SYSTEM_PROMPT, fork_params, from_stored, system_prompt_param, with_system_prompt
from acp_server.protocol import methods
from acp_server.protocol.opening import (
    LoadSessionRequest,
    initialize_params,
    load_session_params,
    new_session_params,
    prompt_params,
)
from acp_server.protocol.results import (
    EMPTY,
    AgentCapabilities,
    AuthCapabilities,
    AuthMethod,
    Implementation,
    InitializeResult,
    ListSessionsResult,
    McpCapabilities,
    NewSessionResult,
    Offered,
    PromptCapabilities,
    SessionCapabilities,
    SessionConfigOption,
    SessionInfo,
    SessionStateResult,
    SetConfigOptionResult,
    SystemPromptCapabilities,
    SystemPromptModes,
    wire,
)
from acp_server.rpc.errors import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    FieldProblem,
    PeerClosedError,
    RpcError,
    invalid_params,
)
from acp_server.rpc.peer import Peer
from acp_server.turns.client import ClientCapabilities
from acp_server.turns.rich import haui_on
from acp_server.turns.workers import Workers
from adapters.base import (
    AdapterCapabilities,
    AgentError,
    AuthRequired,
    RuntimeAdapter,
    SystemPrompt,
    TurnInput,
    auth_needed,
    close_session,
    fork_session,
    open_session,
    speak_unstable,
)
from adapters.base import AuthMethod as AdapterAuthMethod
from journal.errors import JournalError
from journal.redact import redact_text
from journal.store import Journal

if TYPE_CHECKING:
    from acp_server.acp.v2 import V2Surface

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
SEQUENTIAL = frozenset({methods.INITIALIZE})  # handled in read order, so nothing overtakes it
CLOSE_HOOKS_BUDGET = 0.5  # seconds of a shutdown the adapter's close_session hooks may take

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
T = TypeVar("T")


class AcpAgent:
    """The handlers of one connection. `peer` is the connection they talk back through (a
    fresh one by default); `acp.server.serve` runs it with these handlers. `sessions`,
    `outbound` and `workers` let a runner keep sessions, turns and agent threads beyond one
    connection; `echo` shows the others sharing a session what its prompting editor knows."""

    def __init__(
        self,
        adapter: RuntimeAdapter,
        options: AgentOptions | None = None,
        *,
        journal: Journal | None = None,
        peer: Peer | None = None,
        sessions: SessionStore | None = None,
        outbound: Peer | None = None,
        workers: Workers | None = None,
        echo: Echo | None = None,
    ) -> None:
        self.adapter = adapter
        self.options = options or AgentOptions()
        if self.options.unstable:
            speak_unstable(adapter)  # before its capabilities: an agent below is offered them at start
        self.capabilities: AdapterCapabilities = adapter.capabilities()
        self.journal = journal
        # A runner shares `sessions` between its connections, and turns talk through `outbound`
        # (the session's current editor) rather than through the connection they started on.
        self.sessions = (
            sessions
            if sessions is not None
            else SessionStore(journal, adapter_name=adapter.name, launch=self.options.launch)
        )
        self.client = ClientCapabilities()
        self.peer = peer if peer is not None else Peer(sequential=SEQUENTIAL)
        # v2 rewrites what the turns send on this peer; a runner's turns send on `outbound`.
        self.v2 = outbound is None
        self._table: dict[str, Handler] = {}
        self.v2_handlers: V2Surface | None = None  # the v2 handlers, once initialize chose v2
        self._initialized = False
        self._commands = available_commands(self.capabilities)
        self.prompts = Prompts(
            adapter=adapter,
            options=self.options,
            journal=journal,
            sessions=self.sessions,
            peer=outbound if outbound is not None else self.peer,
            client=lambda: self.client,
            commands=self._commands,
            set_mode=self._set_mode,
            workers=workers if workers is not None else Workers(self.options.max_workers),
            echo=echo,
        )
        self.controls = Controls(
            adapter,
            notify=self._notify_outbound,
            options=self._option_list,
            live=self.sessions.live,
            commands=self._commands,
        )

    def handlers(self) -> dict[str, Handler]:
        """Every method of either version; each call is served by the table `initialize` chose."""
        self._table = self._v1_table()
        names = self._table.keys() | methods.V2_AGENT_METHODS
        return {name: self._gated(name, self._chosen(name)) for name in names}

    def _chosen(self, name: str) -> Handler:
        async def chosen(params: dict[str, Any]) -> Any:
            handler = self._table.get(name)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            return await handler(params)

        return chosen

    def _v1_table(self) -> dict[str, Handler]:
        table: dict[str, Handler] = {
            methods.INITIALIZE: self.handle_initialize,
            methods.AUTHENTICATE: self.handle_authenticate,
            methods.LOGOUT: self.handle_logout,
            methods.SESSION_NEW: self.handle_session_new,
            methods.SESSION_PROMPT: self.handle_session_prompt,
            methods.SESSION_CANCEL: self.handle_session_cancel,
            methods.SESSION_SET_MODE: self.handle_session_set_mode,
            methods.SESSION_SET_CONFIG_OPTION: self.handle_session_set_config_option,
        }
        if self.journal is not None:
            table |= {
                methods.SESSION_LOAD: self.handle_session_load,
                methods.SESSION_RESUME: self.handle_session_resume,
                methods.SESSION_LIST: self.handle_session_list,
                methods.SESSION_CLOSE: self.handle_session_close,
                methods.SESSION_DELETE: self.handle_session_delete,
            }
        if self.journal is not None and self.options.unstable and self.capabilities.fork:
            table[methods.SESSION_FORK] = self.handle_session_fork
        return table

    def _gated(self, name: str, handler: Handler) -> Handler:
        if name == methods.INITIALIZE:
            return handler

        async def gated(params: dict[str, Any]) -> Any:
            if not self._initialized:
                raise RpcError(INVALID_REQUEST, "Invalid request: call initialize first")
            try:
                return await handler(params)
            except* JournalError as failed:  # a turn's task group may have wrapped it
                raise _journal_failed(failed) from None

        return gated

    # --- connection ----------------------------------------------------------------------

    async def handle_initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """The version is chosen here, once: 1 gets v1, 2 (or any other, as long as this
        connection can speak v2) gets v2's handlers and dialect (acp.v2)."""
        request = initialize_params(params)
        if request.protocol_version != PROTOCOL_VERSION and self.v2:
            return self._initialize_v2(params)
        self.client = ClientCapabilities.from_wire(request.client_capabilities, request.client_info)
        for entry in self.client.quirks.applied:
            log.info("client %s: applying quirk %s (it %s)", entry.client, entry.quirk, entry.why)
        self._initialized = True
        caps = self.capabilities
        result = InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=self.journal is not None,
                prompt_capabilities=PromptCapabilities(
                    image=caps.image, audio=caps.audio, embedded_context=caps.embedded_context
                ),
                mcp_capabilities=McpCapabilities(http=caps.mcp_http, sse=caps.mcp_sse),
                session_capabilities=self._session_capabilities(),
                auth=AuthCapabilities(logout=Offered()) if caps.logout else None,
            ),
            auth_methods=[
                _auth_method(m) for m in caps.auth_methods if self.client.terminal_auth or m.kind != "terminal"
            ],
            agent_info=Implementation(
                name="acp-server", title=f"acp-server ({self.adapter.name})", version=acp_server.__version__
            ),
        )
        return wire(result)

    def _initialize_v2(self, params: dict[str, Any]) -> dict[str, Any]:
        """v2's client capabilities hold no fs or terminal: our agents use their local ones."""
        from acp_server.acp.v2 import as_object

        terminal_auth = "terminal" in as_object(as_object(params.get("capabilities")).get("auth"))
        client = ClientCapabilities.from_wire({}, as_object(params.get("info")))
        self.client = replace(client, terminal_auth=terminal_auth)
        surface = self.v2_handlers = self.v2_surface()
        self._table = surface.table()
        self.peer.speak(surface.dialect)
        self._initialized = True
        return surface.initialize_result()

    def v2_surface(self) -> V2Surface:
        """The v2 handlers of this connection (a runner's send its turns to every connection)."""
        from acp_server.acp.v2 import V2Surface

        return V2Surface(self)

    def _session_capabilities(self) -> SessionCapabilities:
        """Listing, resuming, closing and deleting need the journal; extra directories do not.
        With `--unstable`, forking (from the journal) and a client's system prompt, where we can."""
        unstable = self.options.unstable
        modes = SystemPromptModes(override=Offered()) if self.capabilities.system_prompt_override else None
        system_prompt = SystemPromptCapabilities(modes) if unstable and self.capabilities.system_prompt else None
        if self.journal is None:
            return SessionCapabilities(additional_directories=Offered(), system_prompt=system_prompt)
        return SessionCapabilities(
            list_=Offered(),
            resume=Offered(),
            close=Offered(),
            delete=Offered(),
            additional_directories=Offered(),
            fork=Offered() if unstable and self.capabilities.fork else None,
            system_prompt=system_prompt,
        )

    def _system_prompt(self, params: dict[str, Any]) -> SystemPrompt | None:
        """The request's `systemPrompt`, when we offered it (else ignored, as a stable server does)."""
        if not (self.options.unstable and self.capabilities.system_prompt):
            return None
        return system_prompt_param(params, override=self.capabilities.system_prompt_override)

    async def handle_authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        """An agent below us that asked for authentication runs it; for ours there is none."""
        from acp_server.protocol.models import AuthenticateParams, parse

        request = parse(AuthenticateParams, params)
        hook = getattr(self.adapter, "authenticate", None)
        if callable(hook) and any(m.id == request.method_id for m in self.capabilities.auth_methods):
            await _agent_call(hook, request.method_id)
        return wire(EMPTY)

    async def handle_logout(self, params: dict[str, Any]) -> dict[str, Any]:
        """The agent below that offers logout logs out; for ours there is nothing to end."""
        hook = getattr(self.adapter, "logout", None)
        if callable(hook) and self.capabilities.logout:
            await _agent_call(hook)
        return wire(EMPTY)

    async def on_close(self) -> None:
        """The client went away: cancel every running and queued turn, and (briefly, as the
        process is about to exit) let the adapter free what it keeps per session."""
        self.prompts.connection_lost()  # before the cancel: the turns it ends lost their client
        if self.v2_handlers is not None:
            self.v2_handlers.background.close()
        sessions = self.sessions.all_live()
        for session in sessions:
            session.queue.cancel_all()
        with anyio.move_on_after(CLOSE_HOOKS_BUDGET):
            for session in sessions:
                await session.queue.drained()
                await anyio.to_thread.run_sync(close_session, self.adapter, session.id, abandon_on_cancel=True)

    # --- sessions ------------------------------------------------------------------------

    async def handle_session_new(self, params: dict[str, Any]) -> dict[str, Any]:
        request = new_session_params(params)
        self._check_mcp_transports(request.mcp_servers)
        system_prompt = self._system_prompt(params)
        if self.client.terminal_auth and (reason := await anyio.to_thread.run_sync(auth_needed, self.adapter)):
            raise RpcError(AUTH_REQUIRED, reason)  # the editor offers our terminal auth method (setup)
        session = await self.sessions.create(
            cwd=request.cwd,
            mcp_servers=request.mcp_servers,
            additional_directories=request.additional_directories or (),
        )
        if system_prompt is not None:
            session.config = with_system_prompt(session.config, system_prompt)
            await self.sessions.save(session, config=dict(session.config))
        try:
            await self.controls.offer(session, await self._ready(session))
        except RpcError:
            await self.sessions.delete(session.id)  # the editor got no session: none is kept
            raise
        self._announce_commands(session)
        self._open(session)
        result = NewSessionResult(
            session_id=session.id,
            modes=modes_state(session.mode, session.controls),
            config_options=self._options(session),
        )
        return wire(result)

    def _options(self, session: Session) -> list[SessionConfigOption]:
        return config_options(
            self.capabilities,
            session.mode,
            session.config,
            haui=self.options.haui,
            controls=session.controls,
            boolean=self.client.boolean_options,
        )

    def _option_list(self, session: Session) -> list[dict[str, Any]]:
        return [wire(option) for option in self._options(session)]

    def _session_state(self, session: Session) -> dict[str, Any]:
        """`modes` and `configOptions`, as session/load and session/resume answer them."""
        return wire(
            SessionStateResult(modes=modes_state(session.mode, session.controls), config_options=self._options(session))
        )

    def _announce_commands(self, session: Session) -> None:
        update = commands_update(session, self._commands)
        try:
            self.peer.spawn(lambda: self.notify_update(session.id, update))
        except PeerClosedError:
            log.info("the client left before the commands of session %s were announced", session.id)

    async def notify_update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    async def _notify_outbound(self, session_id: str, update: dict[str, Any]) -> None:
        """An update outside any request, to the session's editor (a runner routes it)."""
        try:
            await self.prompts.peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        except PeerClosedError:
            log.info("the client left before an update of session %s was shown", session_id)

    async def handle_session_set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        from acp_server.protocol.models import SetModeParams, parse

        request = parse(SetModeParams, params)
        session = await self.sessions.get(request.session_id)
        if agent_modes(session.controls):
            await self.controls.set_mode(session, check_mode(request.mode_id, session.controls))
        else:
            await self._set_mode(session, check_mode(request.mode_id))
        return wire(EMPTY)

    async def handle_session_set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        from acp_server.protocol.models import SetConfigOptionParams, parse

        request = parse(SetConfigOptionParams, params)
        session = await self.sessions.get(request.session_id)
        value = check_value(self.capabilities, request.config_id, request.value, session.controls)
        theirs = agent_option(session.controls, request.config_id)
        if theirs is not None:
            await self.controls.set_option(session, theirs.id, value)
        elif request.config_id == MODE_OPTION:
            await self._set_mode(session, value, announce_options=False)
        else:
            session.config[request.config_id] = value
            await self.sessions.save(session, config=dict(session.config))
        return wire(SetConfigOptionResult(config_options=self._options(session)))

    async def _set_mode(self, session: Session, mode: str, *, announce_options: bool = True) -> None:
        """Change the mode, persist it, and tell the client (in a runner: every one with the
        session open) through both mechanisms."""
        session.mode = mode
        await self.sessions.save(session, mode=mode)
        if not agent_modes(session.controls):  # ACP modes are the agent's: ours is only an option
            await self._notify_outbound(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        if announce_options:
            await self._notify_outbound(
                session.id, {"sessionUpdate": "config_option_update", "configOptions": self._option_list(session)}
            )

    async def handle_session_load(self, params: dict[str, Any]) -> dict[str, Any]:
        """Replay the whole conversation, then answer (modes and config options): history comes first."""
        session = await self.reattach(load_session_params(params), self._system_prompt(params))
        assert self.journal is not None
        await self.replay(session)
        return self.reopened(session)

    async def handle_session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        """What load sends but the history: the answer (modes and config options), then the commands."""
        return self.reopened(await self.reattach(load_session_params(params), self._system_prompt(params)))

    async def replay(self, session: Session, *, run_id: str | None = None, seen: dict[str, int] | None = None) -> None:
        """Send the session's history (or only its run `run_id`) as updates, a run cut off ending
        with a notice; `seen` gets the last seq shown of each run. A run its dead owner left
        `running` is settled first: a reload right after a crash says so (docs/sessions.md)."""
        from acp_server.acp.history import History

        assert self.journal is not None
        await self.journal.recover_runs(session.id)
        rich = haui_on(session.config, self.options.haui)  # the session's switch as it is now (docs/haui.md)
        plans = self.options.unstable and self.client.plan
        history = History(
            self.journal, self.peer, session.id, rich=rich, seen={} if seen is None else seen, plans=plans
        )
        if run_id is None:
            await history.send()
        elif (run := await self.journal.get_run(run_id)) is not None and run.session_id == session.id:
            await history.send_runs([run])

    def reopened(self, session: Session) -> dict[str, Any]:
        """How load and resume end: the commands follow the answer, as after session/new."""
        self._announce_commands(session)
        self._open(session)
        return self._session_state(session)

    async def reattach(self, request: LoadSessionRequest, system_prompt: SystemPrompt | None = None) -> Session:
        """The stored session for load and resume, with the client's MCP servers (and system
        prompt: it replaces the stored one); its cwd must be the one the session was created
        with (the same directory, however it is spelled)."""
        self._check_mcp_transports(request.mcp_servers)
        session = await self.sessions.get(request.session_id, mcp_servers=request.mcp_servers)
        if request.cwd != session.cwd and redact_text(request.cwd) == session.cwd:
            session.cwd = request.cwd  # the journal stores cwds redacted; the editor names the real one
        if request.cwd != session.cwd and not await anyio.to_thread.run_sync(_same_directory, request.cwd, session.cwd):
            problem = "is not the session's working directory"
            raise invalid_params(FieldProblem("cwd", problem), message=f"cwd {problem} ({session.cwd})")
        directories = tuple(request.additional_directories or ())
        if directories != session.additional_directories:  # the request's list is the whole new list
            session.additional_directories = directories
            await self.sessions.save(session, additional_dirs=directories)
        if system_prompt is not None:
            session.config = with_system_prompt(session.config, system_prompt)
            await self.sessions.save(session, config=dict(session.config))
        await self.controls.offer(session, await self._ready(session))
        return session

    async def handle_session_fork(self, params: dict[str, Any]) -> dict[str, Any]:
        """Unstable: a new session whose history is the parent's up to its last finished turn
        (a turn still running is not part of it), replayable with session/load; the parent is
        left as it was. Built from the journal (docs/protocol.md)."""
        request = fork_params(params)
        self._check_mcp_transports(request.mcp_servers)
        system_prompt = self._system_prompt(params)
        parent = await self.sessions.get(request.session_id)
        config = with_system_prompt(parent.config, system_prompt)
        history = await self.sessions.history(parent)
        directories = request.additional_directories or ()
        ready = TurnInput(
            new_session_id(),
            request.cwd,
            (),
            tuple(history.messages),
            mcp_servers=request.mcp_servers,
            additional_directories=directories,
            transcript=history.transcript(),
            system_prompt=from_stored(config.get(SYSTEM_PROMPT)),
        )
        saved = await _agent_call(fork_session, self.adapter, parent.id, ready)  # an agent below forks its own
        session = await self.sessions.fork(
            parent,
            ready.session_id,
            cwd=request.cwd,
            mcp_servers=request.mcp_servers,
            additional_directories=directories,
            config=config,
            transcript=saved,
        )
        await self.controls.offer(session, await self._ready(session))
        self._announce_commands(session)
        self._open(session)
        result = NewSessionResult(
            session_id=session.id,
            modes=modes_state(session.mode, session.controls),
            config_options=self._options(session),
        )
        return wire(result)

    async def handle_session_list(self, params: dict[str, Any]) -> dict[str, Any]:
        from acp_server.protocol.models import ListSessionsParams, parse
        from acp_server.turns.replay import iso

        request = parse(ListSessionsParams, params)
        assert self.journal is not None
        try:
            records, next_cursor = await self.journal.list_sessions(cwd=request.cwd, cursor=request.cursor)
        except ValueError:
            raise invalid_params(
                FieldProblem("cursor", "is not valid"), message="cursor is not one this server issued"
            ) from None
        sessions = [
            SessionInfo(
                session_id=record.id,
                cwd=record.cwd,
                updated_at=iso(record.updated_at),
                title=record.title or None,
                additional_directories=list(record.additional_dirs) or None,
            )
            for record in records
        ]
        return wire(ListSessionsResult(sessions=sessions, next_cursor=next_cursor))

    async def handle_session_close(self, params: dict[str, Any]) -> dict[str, Any]:
        from acp_server.protocol.models import SessionParams, parse

        request = parse(SessionParams, params)
        session = self.sessions.close(request.session_id)
        if session is None:
            await self.sessions.get(request.session_id)  # -32002 when the journal has never heard of it
            session = self.sessions.close(request.session_id)
        self._release(session)
        return wire(EMPTY)

    async def handle_session_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        from acp_server.protocol.models import SessionParams, parse

        request = parse(SessionParams, params)
        self._release(await self.sessions.delete(request.session_id))
        return wire(EMPTY)

    async def _ready(self, session: Session) -> TurnInput:
        """The session's settings and conversation, without a prompt, for the controls hook."""
        if not self.controls.offered:
            return self._settings(session)
        history = await self.sessions.history(session)
        ready = self._settings(session)
        return replace(ready, history=tuple(history.messages), transcript=history.transcript())

    def _settings(self, session: Session) -> TurnInput:
        return TurnInput(
            session.id,
            session.cwd,
            (),
            mcp_servers=session.mcp_servers,
            additional_directories=session.additional_directories,
            notes=self.controls.notes(self.prompts.notes(session.id), session.id),
            system_prompt=from_stored(session.config.get(SYSTEM_PROMPT)),
        )

    def _open(self, session: Session) -> None:
        """Let the adapter get the session ready in a worker thread, without delaying the answer."""
        ready = self._settings(session)

        async def open_() -> None:
            try:
                await anyio.to_thread.run_sync(open_session, self.adapter, ready, abandon_on_cancel=True)
            except Exception:  # a hook's failure is the first prompt's to report, not the session's
                log.warning("the adapter could not get session %s ready", session.id, exc_info=True)

        try:
            self.peer.spawn(open_)
        except PeerClosedError:
            log.info("the client left before session %s was opened", session.id)

    def _release(self, session: Session | None) -> None:
        """Once the session's last turn has wound down, the adapter may free what it keeps."""
        if session is None:
            return

        async def release() -> None:
            await session.queue.drained()
            await anyio.to_thread.run_sync(close_session, self.adapter, session.id)

        try:
            self.peer.spawn(release)
        except PeerClosedError:  # the process is about to exit, and the adapter with it
            log.info("the client left before session %s was released", session.id)

    def _check_mcp_transports(self, servers: tuple[dict[str, Any], ...]) -> None:
        offered = {"stdio": True, "http": self.capabilities.mcp_http, "sse": self.capabilities.mcp_sse}
        for index, server in enumerate(servers):
            if not offered[server["type"]]:
                raise invalid_params(
                    FieldProblem(f"mcpServers.{index}.type", "is not supported"),
                    message=f"MCP transport {server['type']} is not supported",
                )

    async def handle_session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        """A notification. A client that sends it as a request (with an id) still gets the
        cancel, and `{}` as its answer: a result every JSON-RPC response of ACP allows."""
        from acp_server.protocol.models import SessionParams, parse

        request = parse(SessionParams, params)
        session = self.sessions.live(request.session_id)
        if session is None:
            log.info("session/cancel for unknown session ignored")
        else:
            session.queue.cancel_all()
        return {}

    async def handle_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        request = prompt_params(params)
        session = await self.sessions.get(request.session_id)
        self.check_prompt_content(request.prompt)
        return wire(await self.prompts.prompt(session, request.prompt))

    def check_prompt_content(self, blocks: tuple[dict[str, Any], ...]) -> None:
        allowed = {"text", "resource_link"}
        caps = self.capabilities
        allowed |= {
            name
            for name, ok in (("image", caps.image), ("audio", caps.audio), ("resource", caps.embedded_context))
            if ok
        }
        for index, block in enumerate(blocks):
            if block["type"] not in allowed:
                raise invalid_params(
                    FieldProblem(f"prompt.{index}.type", "is not supported"),
                    message=f"this agent does not accept {block['type']} content",
                )


def _auth_method(method: AdapterAuthMethod) -> AuthMethod:
    """A terminal method carries the arguments (and environment) the editor runs us with."""
    if method.kind != "terminal":
        return AuthMethod(id=method.id, name=method.name, description=method.description)
    return AuthMethod(
        id=method.id,
        name=method.name,
        description=method.description,
        type="terminal",
        args=list(method.args),
        env=dict(method.env) or None,
    )


async def _agent_call(hook: Callable[..., T], *args: object) -> T:
    """`hook` in a worker thread, its failure as the editor is told it (auth_required as such)."""
    try:
        return await anyio.to_thread.run_sync(hook, *args)
    except AuthRequired as exc:
        raise RpcError(AUTH_REQUIRED, str(exc)) from None
    except AgentError as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


def _journal_failed(failed: ExceptionGroup[JournalError]) -> RpcError:
    """The error an editor shows when the journal failed a request: what is wrong with which file
    and what to do (disk full, read-only ...), never a bare "Internal error"; the server serves on."""
    error: BaseException = failed
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    log.error("%s", error)
    return RpcError(INTERNAL_ERROR, f"Journal error: {error}")


def _same_directory(first: str, second: str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)
