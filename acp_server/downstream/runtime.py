"""`AcpRuntime`: any ACP agent as a `RuntimeAdapter`, acp-server being its client.

The agent's connection lives on an event loop of the runtime's own, in a daemon thread that
lasts as long as acp-server (the keeper's parent-death signal is tied to the thread that
started it); the server's worker threads reach it through a portal. A turn opens (or brings
back) the session at the agent, sends the prompt, and serves the turn's link in its worker
thread: the agent's updates become sink reports, its requests sink asks (each answered in a
thread of its own), until the agent answers the prompt or the turn is cancelled.
"""

from __future__ import annotations

import atexit
import logging
import shlex
import shutil
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import anyio
from anyio.abc import TaskGroup
from anyio.from_thread import BlockingPortal

from acp_server.downstream import asks
from acp_server.downstream.agent import FORMAT, AgentCommand, Downstream
from acp_server.downstream.link import INBOX_ITEMS, Answered, Ask, Cancelled, Inbox, Item, Update
from acp_server.downstream.login import offered, terminal_method
from acp_server.downstream.quirks import as_installed
from acp_server.downstream.sessions import AgentSession
from acp_server.downstream.terminals import Terminals
from acp_server.downstream.updates import SHOWS_NEITHER, ToolCalls, apply
from acp_server.rpc.errors import RpcError
from adapters.base import (
    AdapterCapabilities,
    AgentError,
    EditorFeatures,
    Health,
    SessionControls,
    Sink,
    TurnCancelled,
    TurnInput,
)
from adapters.events import STOP_REASONS, StopReason, TranscriptSaved

log = logging.getLogger(__name__)

CANCEL_LATENCY = 1.0
START_CHECK = 20.0  # seconds `start_check()` gives the agent to answer initialize (npx may fetch it first)
HOLD = 0.002  # seconds between looks at a lagging sink while streamed text gathers (see `_serve`)
TEXT_CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk"})
FORGOT_NOTICE = "The agent had lost its memory of this session's earlier turns: it starts afresh from here."

T = TypeVar("T")


class LoopThread:
    """The runtime's event loop in a daemon thread, with a portal into it."""

    def __init__(self, name: str) -> None:
        self._ready = threading.Event()
        self._portal: BlockingPortal | None = None
        self._tasks: TaskGroup | None = None
        threading.Thread(target=anyio.run, args=(self._main,), name=name, daemon=True).start()
        self._ready.wait()

    async def _main(self) -> None:
        async with BlockingPortal() as portal, anyio.create_task_group() as tasks:
            self._portal, self._tasks = portal, tasks
            self._ready.set()
            await portal.sleep_until_stopped()
            tasks.cancel_scope.cancel()

    @property
    def tasks(self) -> TaskGroup:
        assert self._tasks is not None
        return self._tasks

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        assert self._portal is not None
        return self._portal.call(func, *args)

    def spawn(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start `func` on the loop without waiting (safe from the server's own loop)."""
        assert self._portal is not None
        self._portal.start_task_soon(func, *args)


class AcpRuntime:
    """An ACP agent started from `command`, one process for every session of acp-server."""

    def __init__(self, command: AgentCommand) -> None:
        self.name = command.name
        self.command = command
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._downstream: Downstream | None = None
        self._capabilities: AdapterCapabilities | None = None
        self._sessions: dict[str, AgentSession] = {}
        self._unstable = False  # offer the agent ACP's unstable parts we pass on (`speak_unstable`)

    # --- the loop and the agent --------------------------------------------------------------

    def _agent(self) -> tuple[LoopThread, Downstream]:
        with self._lock:
            if self._loop is None or self._downstream is None:
                self._loop = LoopThread(f"acp-agent-{self.name}")
                self._downstream = Downstream(self.command, self._loop.tasks, unstable=self._unstable)
                atexit.register(self.close)
            return self._loop, self._downstream

    def _call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        loop, _ = self._agent()
        return loop.call(func, *args)

    def close(self) -> None:
        """Stop the agent (its whole process group) and the loop; safe to call twice."""
        with self._lock:
            loop, downstream, self._loop, self._downstream = self._loop, self._downstream, None, None
        if loop is not None and downstream is not None:
            try:
                loop.call(downstream.shutdown)
            except Exception:
                log.warning("%s: stopping the agent failed", self.name, exc_info=True)

    # --- RuntimeAdapter ------------------------------------------------------------------

    def capabilities(self) -> AdapterCapabilities:
        """What the agent said it can do (it is started for this, once); conservative when it
        would not start: the first session then says why."""
        if self._capabilities is None:
            _, downstream = self._agent()
            try:
                info = self._call(downstream.info)
            except AgentError as exc:
                log.error("%s", exc)
                self._capabilities = AdapterCapabilities(cancel_latency=CANCEL_LATENCY, fork=False)
            else:
                self._capabilities = AdapterCapabilities(
                    image=info.image,
                    audio=info.audio,
                    embedded_context=info.embedded_context,
                    mcp_http=info.mcp_http,
                    mcp_sse=info.mcp_sse,
                    cancel_latency=CANCEL_LATENCY,
                    auth_methods=tuple(offered(m) for m in info.auth_methods),
                    logout=info.logout,
                    fork=info.fork,
                    system_prompt=info.system_prompt,
                    system_prompt_override=info.system_prompt_override,
                )
        return self._capabilities

    @property
    def start_failure(self) -> str | None:
        """Why the agent did not start, when its last start failed."""
        downstream = self._downstream
        return downstream.failure if downstream is not None else None

    def health(self) -> Health:
        """What is known without starting the agent (the contract gives health() 2 s): its
        program is on PATH, and its last start, if any, did not fail. `start_check` starts it."""
        shown = shlex.join(self.command.argv)
        settings = {"command": (shown, self.command.source)}
        if shutil.which(self.command.argv[0]) is None:
            return Health(False, self.command.failed(f"{self.command.argv[0]!r} was not found on PATH"), settings)
        if failure := self.start_failure:
            return Health(False, failure, settings)
        return Health(True, f"runs {shown}", settings)

    def start_check(self) -> Health:
        """Healthy once the agent has answered `initialize` (it is started for this, within
        START_CHECK seconds): a program that is there but will not run (npx offline) shows in
        `doctor`, not at the editor's first session."""
        shown = shlex.join(self.command.argv)
        settings = {"command": (shown, self.command.source)}
        loop, downstream = self._agent()
        try:
            info = loop.call(_within, START_CHECK, downstream.info)
        except AgentError as exc:
            return Health(False, str(exc), settings)
        except TimeoutError:
            why = f"it did not answer initialize within {START_CHECK:g} s"
            return Health(False, self.command.failed(why), settings)
        return Health(True, f"runs {shown}: {info.name} {info.version} answered initialize", settings)

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        _, downstream = self._agent()
        session = self._session(turn)
        inbox, sent = self._call(self._begin, downstream, session, turn)
        try:
            if not sent:  # the journal and the editor are told first
                self._remember(session, sink)
                if session.forgot:
                    session.forgot = False
                    _say(sink, turn, FORGOT_NOTICE)
                self._call(self._start_prompt, downstream, session, inbox, turn.prompt)
            roots = (turn.cwd, *turn.additional_directories)
            finish_allowed = downstream.quirks.has("leaves_calls_unfinished")
            return _serve(inbox, sink, roots=roots, finish_allowed=finish_allowed, editor=turn.editor)
        finally:
            session.turn = None
            inbox.close()

    def cancel(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        turn = session.turn if session is not None else None
        if session is None or turn is None:
            return
        turn.cancel()
        loop, downstream = self._agent()
        loop.spawn(downstream.cancel, session)

    # --- session hooks -------------------------------------------------------------------

    def session_controls(self, ready: TurnInput) -> SessionControls:
        """Open (or bring back) the session at the agent before the editor is answered."""
        _, downstream = self._agent()
        session = self._session(ready)
        session.notes = ready.notes
        return self._call(downstream.open, session, ready)

    def set_session_mode(self, session_id: str, mode_id: str) -> SessionControls:
        _, downstream = self._agent()
        return self._call(downstream.set_mode, self._known(session_id), mode_id)

    def set_session_option(self, session_id: str, option_id: str, value: str) -> SessionControls:
        _, downstream = self._agent()
        return self._call(downstream.set_option, self._known(session_id), option_id, value)

    def speak_unstable(self) -> None:
        """The agent, started after this, is told it may send plan operations (ACP unstable)."""
        self._unstable = True

    def fork_session(self, parent_id: str, ready: TurnInput) -> TranscriptSaved | None:
        """The agent forks its own session of `parent_id` (session/fork) for `ready`'s; the fork's
        id at the agent, to keep as that session's transcript. None: the parent never reached
        the agent, and the fork starts there as a new session on its first turn."""
        _, downstream = self._agent()
        with self._lock:
            parent = self._sessions.get(parent_id)
        session = self._session(ready)
        theirs = self._call(downstream.fork, parent.theirs if parent else None, session, ready)
        if theirs is None:
            return None
        session.saved = theirs  # the journal keeps it with the fork: the first turn need not
        return TranscriptSaved(FORMAT, ({"agent": session.agent, "sessionId": theirs},), base=True)

    def close_session(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None and self._downstream is not None:
            self._call(self._downstream.close, session)

    def authenticate(self, method_id: str) -> None:
        _, downstream = self._agent()
        self._call(downstream.authenticate, method_id)

    def logout(self) -> None:
        _, downstream = self._agent()
        self._call(downstream.logout)

    def login_command(self, method_id: str | None) -> tuple[str, ...]:
        """The agent's command with its terminal sign-in `method_id`'s arguments (the agent is
        started to ask, and stopped); AgentError when it will not start, LookupError when it
        offers no such method."""
        _, downstream = self._agent()
        try:
            info = self._call(downstream.info)
            argv = self._call(as_installed, self.command.argv)
        finally:
            self.close()
        return (*argv, *terminal_method(info.auth_methods, method_id)["args"])

    # --- helpers -------------------------------------------------------------------------

    def _session(self, turn: TurnInput) -> AgentSession:
        with self._lock:
            session = self._sessions.get(turn.session_id)
            if session is None:
                session = self._sessions[turn.session_id] = AgentSession(turn.session_id, turn.cwd)
            return session

    def _known(self, session_id: str) -> AgentSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise AgentError("the session is not open at the agent")
        return session

    @staticmethod
    async def _begin(downstream: Downstream, session: AgentSession, turn: TurnInput) -> tuple[Inbox, bool]:
        """The turn's link, the session open at the agent; the prompt is sent at once (True)
        unless the journal or the editor must be told something first."""
        await downstream.open(session, turn)
        inbox = Inbox()
        session.turn = inbox
        if session.saved != session.theirs or session.forgot:
            return inbox, False
        await AcpRuntime._start_prompt(downstream, session, inbox, turn.prompt)
        return inbox, True

    @staticmethod
    async def _start_prompt(
        downstream: Downstream, session: AgentSession, inbox: Inbox, blocks: tuple[dict[str, Any], ...]
    ) -> None:
        async def run() -> None:
            try:
                await downstream.prompt(session, inbox, blocks)
            except Exception:
                log.exception("the prompt to the agent failed")

        downstream.tasks.start_soon(run)

    @staticmethod
    def _remember(session: AgentSession, sink: Sink) -> None:
        """Keep the agent's session id in our journal, so a restarted acp-server finds it."""
        if session.theirs is not None and session.saved != session.theirs:
            sink.save_transcript(FORMAT, [{"agent": session.agent, "sessionId": session.theirs}], base=True)
            session.saved = session.theirs


def _serve(
    inbox: Inbox,
    sink: Sink,
    *,
    roots: tuple[str, ...] = (),
    finish_allowed: bool = False,
    editor: EditorFeatures = SHOWS_NEITHER,
) -> StopReason:
    """The turn in its worker thread: the link's items, in order, until the agent answers
    (calls it allowed and left open are completed then, when `finish_allowed`).

    Streamed text is held only while the editor's side lags (the sink still has reports it has
    not taken: a commit or a frame is under way): it gathers meanwhile without waking this
    thread for each chunk, and goes once the sink has taken what it had, or anything else comes;
    with nothing in the way, text goes at once. Each chunk is its own sink call: the thread
    bridge merges them in its buffer and, counting them, publishes a stream faster than an
    editor draws once a frame (merging here would hide the count, and cost a commit and a frame
    for every few chunks)."""
    tools = ToolCalls(sink, roots=roots)
    terminals = Terminals(sink, tools, roots=roots)
    waiting: list[Item] = []  # text chunks held while the sink lags
    while True:
        items = inbox.get(HOLD if waiting else None)
        waiting += items
        if len(waiting) < INBOX_ITEMS and _all_text(items) and _lagging(sink):
            continue  # only the new items are looked at: a held run is text already
        batch, waiting = waiting, []
        for index, item in enumerate(batch):
            if isinstance(item, Cancelled | Answered):
                inbox.put_back(batch[index + 1 :])  # a question asked after the end is still answered
            if isinstance(item, Update):
                apply(item.update, sink, tools, editor)
            elif isinstance(item, Ask):
                _answer(item, sink, tools, terminals)
            elif isinstance(item, Cancelled):
                raise TurnCancelled("the turn was cancelled")
            else:
                reason = _stop_reason(item, sink)
                if finish_allowed:
                    tools.finish_allowed()
                return reason


def _all_text(items: list[Item]) -> bool:
    return all(_chunk_text(item)[0] is not None for item in items)


def _lagging(sink: Sink) -> bool:
    """Whether reports wait for the editor's side (the thread bridge's `pending`)."""
    pending: object = getattr(sink, "pending", 0)
    return isinstance(pending, int) and pending > 0


async def _within(seconds: float, func: Callable[[], Awaitable[T]]) -> T:
    with anyio.fail_after(seconds):
        return await func()


def _chunk_text(item: Item) -> tuple[str | None, str]:
    """The kind and text of a plain text chunk of words or thoughts; (None, "") for anything else."""
    if not isinstance(item, Update):
        return None, ""
    kind = item.update.get("sessionUpdate")
    content: Any = item.update.get("content")
    if kind not in TEXT_CHUNKS or not isinstance(content, dict):
        return None, ""
    block = cast(dict[str, Any], content)
    text = block.get("text")
    if block.get("type") != "text" or not isinstance(text, str):
        return None, ""
    return cast(str, kind), text


def _answer(item: Ask, sink: Sink, tools: ToolCalls, terminals: Terminals) -> None:
    try:
        prepared = asks.prepare(item.method, item.params, tools)
    except RpcError as exc:
        item.reply.error(exc)
        return

    def work() -> None:
        try:
            item.reply.result(asks.answer(prepared, sink, tools, terminals))
        except RpcError as exc:
            item.reply.error(exc)
        except Exception as exc:
            log.exception("answering the agent's %s failed", item.method)
            item.reply.error(exc)

    threading.Thread(target=work, name=f"agent-ask-{item.method}", daemon=True).start()


def _stop_reason(answered: Answered, sink: Sink) -> StopReason:
    if answered.error is not None:
        if isinstance(answered.error, AgentError):
            raise answered.error
        raise AgentError(f"the agent failed: {answered.error}")
    answer: Any = answered.result
    result = cast(dict[str, Any], answer) if isinstance(answer, dict) else {}
    usage = result.get("usage")
    if isinstance(usage, dict):
        _usage(cast(dict[str, Any], usage), sink)
    reason = result.get("stopReason")
    if not isinstance(reason, str) or reason == "cancelled" or reason not in STOP_REASONS:
        log.warning("the agent ended its turn with %r; counted as end_turn", reason)
        return "end_turn"
    return cast(StopReason, reason)


def _usage(usage: dict[str, Any], sink: Sink) -> None:
    tokens = {key: usage.get(key) for key in ("inputTokens", "outputTokens", "cachedReadTokens")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in tokens.values() if v is not None):
        return
    sink.usage(
        input_tokens=tokens["inputTokens"] or 0,
        output_tokens=tokens["outputTokens"] or 0,
        cached_read_tokens=tokens["cachedReadTokens"],
    )


def _say(sink: Sink, turn: TurnInput, text: str) -> None:
    """A notice when the editor shows them, else a line of the reply."""
    if turn.editor.notices:
        sink.notice(text, severity="warning")
    else:
        sink.text(f"_{text}_\n\n")
