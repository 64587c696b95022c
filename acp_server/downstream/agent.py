"""The agent below as the runtime's event loop drives it: one process at a time (started on
first use, and again on the first use after it died), and acp-server's sessions at it.

A session is opened at the agent when acp-server's session opens or its first turn starts.
After acp-server or the agent restarted, it is brought back under the agent's own id (kept in
our journal as the session's `acp-agent` transcript): `session/resume` when the agent offers
it, else `session/load`, whose replay is not shown again (the editor has ours). An agent that
cannot bring it back gets a new session, and the session is marked `forgot` so the next turn
says that the agent lost its memory of the earlier turns.
"""

from __future__ import annotations

import logging
import shutil
from typing import Any, cast

import anyio
from anyio.abc import TaskGroup

from acp_server.downstream import controls as wire_controls
from acp_server.downstream.client import AgentClient, AgentInfo
from acp_server.downstream.link import Answered, Inbox
from acp_server.downstream.process import AgentProcess, cause
from acp_server.downstream.quirks import AgentQuirks, as_installed, quirks_for
from acp_server.downstream.sessions import AgentSession, SessionRoute
from acp_server.protocol import methods
from acp_server.rpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, PeerClosedError, RequestTimeoutError, RpcError
from adapters.base import AgentError, AuthRequired, SessionControls, Transcript, TurnInput
from adapters.frozen import frozen
from journal.redact import redact_text

log = logging.getLogger(__name__)

FORMAT = "acp-agent"  # the transcript format that keeps the agent's session id
SESSION_TIMEOUT = 120.0  # seconds for session/new, load and resume (Claude's can take a while)
CONTROL_TIMEOUT = 30.0  # seconds for set_mode, set_config_option, close and authenticate
PREVIOUS_PROMPT_WAIT = 30.0  # seconds a prompt waits for the agent to answer a cancelled one
QUIET = 0.3  # seconds without a replayed update after which a late replay counts as over
QUIET_LIMIT = 5.0
EXIT_WAIT = 2.0  # seconds to wait for a dead agent's exit status, for the message

Json = dict[str, Any]


@frozen
class AgentCommand:
    """How to start the agent: acp-server's name for it (`acp`, a preset), its argv, where that
    came from (for `doctor`), and how to install it (for the message when it will not start)."""

    name: str
    argv: tuple[str, ...]
    source: str = "command line"
    install: str | None = None

    def failed(self, why: str) -> str:
        """The one line that says the agent did not start, why, and how to install it."""
        how = f"; install it: {self.install}" if self.install else ""
        return f"{self.name}: the agent did not start ({why}){how}"


def saved_session(transcript: Transcript | None, agent: str) -> str | None:
    """The agent session id our journal keeps for the session, if this agent's."""
    if transcript is None or transcript.format != FORMAT or not transcript.messages:
        return None
    last = transcript.messages[-1]
    if not isinstance(last, dict):
        return None
    kept = cast(Json, last)
    theirs = kept.get("sessionId")
    return theirs if kept.get("agent") == agent and isinstance(theirs, str) else None


class Downstream:
    """The agent process and acp-server's sessions at it; every method runs on the loop."""

    def __init__(self, command: AgentCommand, tasks: TaskGroup, *, unstable: bool = False) -> None:
        self.command = command
        self.unstable = unstable
        self.quirks: AgentQuirks = quirks_for(command.argv)
        self._tasks = tasks
        self._client: AgentClient | None = None
        self._generation = 0
        self._starting = anyio.Lock()
        self._stopping = False
        self.failure: str | None = None  # why the last start failed, until one succeeds

    # --- the process ---------------------------------------------------------------------

    async def client(self) -> AgentClient:
        """The running agent, started when there is none."""
        async with self._starting:
            if self._client is not None and not self._client.closed.is_set():
                return self._client
            if self._stopping:
                raise AgentError("acp-server is stopping")
            self._client = await self._start()
            return self._client

    async def info(self) -> AgentInfo:
        client = await self.client()
        assert client.info is not None  # set by connect
        return client.info

    async def _start(self) -> AgentClient:
        try:
            client = await self._started()
        except AgentError as exc:
            self.failure = str(exc)
            raise
        self.failure = None
        return client

    async def _started(self) -> AgentClient:
        label, argv = self.command.name, self.command.argv
        if shutil.which(argv[0]) is None:
            raise AgentError(self.command.failed(f"{argv[0]!r} was not found on PATH"))
        try:
            process = await AgentProcess.start(await as_installed(argv))
        except OSError as exc:
            raise AgentError(self.command.failed(f"cannot start {argv[0]}: {exc.strerror or exc}")) from None
        client = AgentClient(process, label=label, unstable=self.unstable)
        self._generation += 1
        generation = self._generation
        try:
            info = await client.connect(self._tasks, lambda: self._ended(client, generation))
        except RpcError as exc:
            await process.stop(linger=True)
            raise AgentError(f"{label}: the agent did not start (it refused initialize: {exc.message})") from None
        except (PeerClosedError, RequestTimeoutError) as exc:
            await process.stop(linger=True)
            with anyio.move_on_after(EXIT_WAIT):  # its last stderr lines, for the cause
                await process.stderr_closed.wait()
            raise AgentError(self.command.failed(self._why(client, exc))) from None
        self.quirks = quirks_for(argv, info.name)
        log.info("%s: started %s %s (pid %d)", label, info.name, info.version, process.pid)
        return client

    async def _ended(self, client: AgentClient, generation: int) -> None:
        with anyio.move_on_after(EXIT_WAIT):
            await client.process.wait()
        client.process.close_fds()
        if not self._stopping and client.info is not None:  # a failed start says so once, in its error
            log.warning("%s: the agent exited (%s)", self.command.name, _exit_text(client))

    def _why(self, client: AgentClient, exc: BaseException) -> str:
        if isinstance(exc, RpcError):
            return redact_text(exc.message)  # the agent's words, quoted to the editor
        if isinstance(exc, RequestTimeoutError) and client.process.returncode is None:
            return "it did not answer initialize in time"
        last = _last_stderr(client)
        return f"it exited: {last}" if last else "it exited before answering initialize"

    async def shutdown(self) -> None:
        self._stopping = True
        async with self._starting:
            if self._client is not None:
                await self._client.process.stop(linger=self.quirks.has("lingers_after_eof"))

    # --- sessions ------------------------------------------------------------------------

    async def open(self, session: AgentSession, ready: TurnInput) -> SessionControls:
        """The session at the agent, opened or brought back when it is not there yet."""
        client = await self.client()
        if session.theirs is not None and session.generation == self._generation:
            return session.controls
        theirs = session.theirs or saved_session(ready.transcript, _name(client))
        if theirs is not None and await self._restore(client, session, theirs, ready):
            return session.controls
        session.forgot = theirs is not None or bool(ready.history)
        await self._new(client, session, ready)
        return session.controls

    async def _new(self, client: AgentClient, session: AgentSession, ready: TurnInput) -> None:
        setup = self._setup(client, session, ready)
        answer = await self._session_call(client, methods.SESSION_NEW, setup)
        theirs = _object(answer).get("sessionId")
        if not isinstance(theirs, str) or not theirs:
            raise AgentError("the agent answered session/new without a session id")
        await self._attach(client, session, theirs, answer, setup)

    async def _restore(self, client: AgentClient, session: AgentSession, theirs: str, ready: TurnInput) -> bool:
        """Bring the agent's session back (its replay goes nowhere); False when it cannot."""
        info = client.info
        assert info is not None
        method = methods.SESSION_RESUME if info.resume else methods.SESSION_LOAD if info.load else None
        if method is None:
            return False
        route = SessionRoute(session)  # in place before the call, so the replay finds no turn
        client.routes[theirs] = route
        setup = self._setup(client, session, ready)
        try:
            answer = await self._session_call(client, method, {"sessionId": theirs, **setup})
        except AuthRequired:
            client.routes.pop(theirs, None)
            raise  # the editor is told to log in; the session is brought back once it has
        except AgentError as exc:
            client.routes.pop(theirs, None)
            log.info("%s: could not bring back session %s: %s", self.command.name, theirs, exc)
            return False
        if not isinstance(answer, dict):  # Hermes answers a load of a session it lost with null
            client.routes.pop(theirs, None)
            return False
        await self._attach(client, session, theirs, answer, setup)
        if method == methods.SESSION_LOAD and self.quirks.has("replay_after_load"):
            await _quiet(session)
        return True

    async def _attach(self, client: AgentClient, session: AgentSession, theirs: str, answer: Any, setup: Json) -> None:
        if session.theirs is not None and session.theirs != theirs:
            client.routes.pop(session.theirs, None)
        session.theirs, session.generation, session.agent = theirs, self._generation, _name(client)
        session.setup = setup
        session.controls = wire_controls.from_answer(answer, session.controls)
        if theirs not in client.routes:
            await client.route(theirs, SessionRoute(session))

    async def fork(self, parent: str | None, session: AgentSession, ready: TurnInput) -> str | None:
        """The agent's fork of its session `parent` (else the one our journal keeps for the
        parent: `ready.transcript` is the parent's), attached as `session`; None when the parent
        has none at the agent."""
        client = await self.client()
        theirs = parent or saved_session(ready.transcript, _name(client))
        if theirs is None:
            return None
        setup = self._setup(client, session, ready)
        answer = await self._session_call(client, methods.SESSION_FORK, {"sessionId": theirs, **setup})
        forked = _object(answer).get("sessionId")
        if not isinstance(forked, str) or not forked:
            raise AgentError("the agent answered session/fork without a session id")
        await self._attach(client, session, forked, answer, setup)
        return forked

    def _setup(self, client: AgentClient, session: AgentSession, ready: TurnInput) -> Json:
        params: Json = {"cwd": session.cwd, "mcpServers": [_server(s) for s in ready.mcp_servers]}
        info = client.info
        if ready.additional_directories and info is not None and info.directories:
            params["additionalDirectories"] = list(ready.additional_directories)
        if (prompt := ready.system_prompt) is not None and info is not None and info.system_prompt:
            mode = "override" if prompt.override else "append"  # checked against what it offers (handlers)
            params["systemPrompt"] = {"mode": mode, "content": [{"type": "text", "text": prompt.text}]}
        return params

    async def _session_call(self, client: AgentClient, method: str, params: Json) -> Any:
        try:
            return await client.request(method, params, timeout=SESSION_TIMEOUT)
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                raise AuthRequired(exc.message) from None
            raise AgentError(f"the agent refused {method}: {exc.message}") from None
        except (PeerClosedError, RequestTimeoutError) as exc:
            raise AgentError(f"{method}: {self._why(client, exc)}") from None

    # --- turns ---------------------------------------------------------------------------

    async def prompt(self, session: AgentSession, inbox: Inbox, blocks: tuple[Json, ...]) -> None:
        """Send the prompt and put the agent's answer in `inbox` last. A session's prompt waits
        until the agent answered the one before (a cancelled one too), within limits."""
        waited = False
        with anyio.move_on_after(PREVIOUS_PROMPT_WAIT):
            await session.prompting.acquire()
            waited = True
        if not waited:
            log.warning("%s: the agent has not answered the previous prompt; sending the next", self.command.name)
        if inbox.cancelled or inbox.closed:  # cancelled before it was sent: nothing to send
            if waited:
                session.prompting.release()
            return
        session.inbox = inbox
        try:
            try:
                answered = await self._ask_prompt(session, blocks)
            except BaseException as exc:
                inbox.put_nowait(Answered(error=exc))
                raise
            finally:
                if session.inbox is inbox:
                    session.inbox = None
            inbox.put_nowait(answered)
            if _stop(answered) == "cancelled" and self.quirks.has("stale_end_after_cancel"):
                await self._reopen(session)  # before the next prompt is sent
        finally:
            if waited:
                session.prompting.release()

    async def _ask_prompt(self, session: AgentSession, blocks: tuple[Json, ...]) -> Answered:
        client = await self.client()
        params = {"sessionId": session.theirs, "prompt": list(blocks)}
        retry = session.cancelled and self.quirks.has("fails_after_cancel")
        session.cancelled = False
        try:
            try:
                return Answered(await client.request(methods.SESSION_PROMPT, params))
            except RpcError as exc:
                if not (retry and exc.code == INTERNAL_ERROR) or session.cancelled:
                    raise
                log.info("%s: the prompt after a cancel failed (%s); sending it again", self.command.name, exc.message)
                return Answered(await client.request(methods.SESSION_PROMPT, params))
        except RpcError as exc:
            return Answered(error=AuthRequired(exc.message) if exc.code == AUTH_REQUIRED else AgentError(exc.message))
        except PeerClosedError:
            with anyio.move_on_after(EXIT_WAIT):
                await client.process.wait()
            return Answered(
                error=AgentError(
                    f"The agent exited during the turn ({_exit_text(client)}); it is started again for the next prompt"
                )
            )

    async def _reopen(self, session: AgentSession) -> None:
        """Close the session at the agent and resume it under the same id, with the mode and
        options it had (`stale_end_after_cancel`: what a cancelled turn left behind goes with the
        closed session). When that fails, the next turn brings the session back as after a restart."""
        client, theirs, controls = self._client, session.theirs, session.controls
        info = client.info if client is not None else None
        if client is None or info is None or theirs is None or not (info.close and info.resume):
            return
        try:
            await client.request(methods.SESSION_CLOSE, {"sessionId": theirs}, timeout=CONTROL_TIMEOUT)
            answer = await client.request(
                methods.SESSION_RESUME, {"sessionId": theirs, **session.setup}, timeout=SESSION_TIMEOUT
            )
            session.controls = wire_controls.from_answer(answer, controls)
            await self._restore_controls(client, session, controls)
        except (RpcError, PeerClosedError, RequestTimeoutError) as exc:
            log.warning("%s: could not reopen session %s after a cancel: %s", self.command.name, theirs, exc)
            session.generation = 0  # brought back by the next turn's open
        else:
            log.info("%s: reopened session %s after a cancel", self.command.name, theirs)

    async def _restore_controls(self, client: AgentClient, session: AgentSession, before: SessionControls) -> None:
        """Set the mode and option values `before` had where the agent's answer differs."""
        theirs = session.theirs
        if before.current_mode is not None and session.controls.current_mode != before.current_mode:
            params = {"sessionId": theirs, "modeId": before.current_mode}
            await client.request(methods.SESSION_SET_MODE, params, timeout=CONTROL_TIMEOUT)
            session.controls = wire_controls.updated(
                session.controls, {"sessionUpdate": "current_mode_update", "currentModeId": before.current_mode}
            )
        now = {option.id: option.default for option in session.controls.config_options}
        for option in before.config_options:
            if option.id in now and now[option.id] != option.default:
                params = {"sessionId": theirs, **wire_controls.set_params(before, option.id, option.default)}
                answer = await client.request(methods.SESSION_SET_CONFIG_OPTION, params, timeout=CONTROL_TIMEOUT)
                session.controls = wire_controls.from_answer(answer, session.controls)

    @property
    def tasks(self) -> TaskGroup:
        return self._tasks

    async def cancel(self, session: AgentSession) -> None:
        """Withdraw the prompt the agent is working on (a cancel before it was sent stops it
        being sent: `prompt` checks the inbox)."""
        if session.inbox is None or session.theirs is None or self._client is None:
            return
        session.cancelled = True
        await self._client.notify(methods.SESSION_CANCEL, {"sessionId": session.theirs})

    # --- controls ------------------------------------------------------------------------

    async def set_mode(self, session: AgentSession, mode_id: str) -> SessionControls:
        await self._control(session, methods.SESSION_SET_MODE, {"modeId": mode_id})
        session.controls = wire_controls.updated(
            session.controls, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}
        )
        return session.controls

    async def set_option(self, session: AgentSession, option_id: str, value: str) -> SessionControls:
        params = wire_controls.set_params(session.controls, option_id, value)
        answer = await self._control(session, methods.SESSION_SET_CONFIG_OPTION, params)
        session.controls = wire_controls.from_answer(answer, session.controls)
        return session.controls

    async def _control(self, session: AgentSession, method: str, params: Json) -> Any:
        client = await self.client()
        if session.theirs is None or session.generation != self._generation:
            raise AgentError("the session is not open at the agent")
        try:
            return await client.request(method, {"sessionId": session.theirs, **params}, timeout=CONTROL_TIMEOUT)
        except RpcError as exc:
            raise AgentError(f"the agent refused {method}: {exc.message}") from None
        except (PeerClosedError, RequestTimeoutError) as exc:
            raise AgentError(f"{method}: {self._why(client, exc)}") from None

    async def close(self, session: AgentSession) -> None:
        client = self._client
        if client is None or session.theirs is None or session.generation != self._generation:
            return
        client.routes.pop(session.theirs, None)
        if client.info is not None and client.info.close and not client.closed.is_set():
            with anyio.move_on_after(CONTROL_TIMEOUT):
                try:
                    await client.request(methods.SESSION_CLOSE, {"sessionId": session.theirs})
                except (RpcError, PeerClosedError) as exc:
                    log.info("%s: session/close: %s", self.command.name, exc)

    async def authenticate(self, method_id: str) -> None:
        await self._auth_call(methods.AUTHENTICATE, {"methodId": method_id}, "authentication failed")

    async def logout(self) -> None:
        await self._auth_call(methods.LOGOUT, {}, "logout failed")

    async def _auth_call(self, method: str, params: Json, failed: str) -> None:
        client = await self.client()
        try:
            await client.request(method, params, timeout=None)
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                raise AuthRequired(exc.message) from None
            raise AgentError(f"{failed}: {exc.message}") from None
        except PeerClosedError as exc:
            raise AgentError(f"{method}: {self._why(client, exc)}") from None


async def _quiet(session: AgentSession) -> None:
    """Wait until the agent has sent nothing for the session for QUIET seconds (at most QUIET_LIMIT)."""
    with anyio.move_on_after(QUIET_LIMIT):
        while True:
            session.heard = anyio.Event()
            with anyio.move_on_after(QUIET) as idle:
                await session.heard.wait()
            if idle.cancelled_caught:
                return


def _server(server: Json) -> Json:
    """A stdio MCP server as the schema writes it: with no `type` (ours adds `stdio`)."""
    return {k: v for k, v in server.items() if not (k == "type" and v == "stdio")}


def _name(client: AgentClient) -> str:
    return client.info.name if client.info is not None else client.label


def _last_stderr(client: AgentClient) -> str | None:
    """The stderr line that says why the agent failed (npm's noise left out), redacted: it is
    quoted in errors the editor is shown."""
    line = cause(client.process.stderr)
    return redact_text(line) if line else None


def _exit_text(client: AgentClient) -> str:
    code = client.process.returncode
    status = "still running" if code is None else f"exit status {code}"
    last = _last_stderr(client)
    return f"{status}: {last}" if last else status


def _stop(answered: Answered) -> Any:
    """The stop reason the agent answered a prompt with, if it answered one."""
    return _object(answered.result).get("stopReason") if answered.error is None else None


def _object(value: Any) -> Json:
    return cast(Json, value) if isinstance(value, dict) else {}
