"""The terminal's ACP client, shared by `prompt` and `attach`: one connection to a server (a
subprocess's pipes, or a runner's socket) spoken through the same `Peer` the server uses. It shows
the `session/update`s as they arrive, answers permission questions on the terminal or by
`--allow`/`--deny`, serves `fs/*` from the local disk (`local`), and hands Ctrl-C to the command.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio

import acp_server
from acp_server.cli.display import Display
from acp_server.cli.local import Terminal, question, read_text_file, write_text_file
from acp_server.protocol import methods
from acp_server.protocol.answers import (
    InitializeAnswer,
    MalformedAnswerError,
    PermissionOption,
    RequestPermissionParams,
    parse_answer,
)
from acp_server.protocol.models import WireModel, parse
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import INTERNAL_ERROR, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import Frame, FrameWriter
from adapters.printable import printable

PROTOCOL_VERSION = 1
CLIENT_INFO = {"name": "acp-server-prompt", "version": acp_server.__version__}
CLIENT_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}}
STARTUP_TIMEOUT = 30.0  # seconds for initialize + opening the session together

EXIT_ERROR = 1
EXIT_STARTUP = 2
EXIT_INTERRUPTED = 130
STOP_REASONS: dict[str, tuple[int, str | None]] = {
    "end_turn": (0, None),
    "refusal": (3, "the agent refused to continue"),
    "max_tokens": (4, "the agent reached its token limit"),
    "max_turn_requests": (4, "the agent reached its limit of model requests for this turn"),
    "cancelled": (EXIT_INTERRUPTED, "the turn was cancelled"),
}
CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}
NOBODY_TO_ASK = "nobody could be asked: acp-server {command} has no terminal; run it with --allow or --deny"

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
A = TypeVar("A", bound=WireModel)


class ServerAnswerError(Exception):
    """The server answered one of our requests with something that does not match the schema."""


class Link(Protocol):
    """One connection to a server: its frames, a writer, and how to end it (EOF, then wait)."""

    frames: AsyncIterator[Frame]
    writer: FrameWriter

    async def close(self) -> None: ...


def checked(method: str, answer: type[A], result: Any) -> A:
    try:
        return parse_answer(answer, result)
    except MalformedAnswerError as exc:
        raise ServerAnswerError(f"its answer to {method} was malformed: {exc}") from None


def warn(message: str) -> None:
    """A message on stderr; what it quotes (an error the server or an agent wrote) made printable."""
    print(printable(message), file=sys.stderr, flush=True)


class Client:
    """One connection, one session. `converse` is the command's part; Ctrl-C calls `interrupted`,
    which by default quits at once."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.display = Display(sys.stdout, raw=args.json, color=sys.stdout.isatty())
        self.session_id: str | None = None
        self.muted = False  # updates are not shown (a load's replay of what the user saw before)
        self.cancelling = False  # the turn was cancelled: open and later questions are answered so
        self.closed = anyio.Event()  # the server closed the connection
        self._terminal: Terminal | None = None
        self._ask_lock = anyio.Lock()
        self._asks: set[anyio.CancelScope] = set()
        self._conversation = anyio.CancelScope()

    def handlers(self) -> dict[str, Handler]:
        return {
            methods.SESSION_UPDATE: self.handle_session_update,
            methods.REQUEST_PERMISSION: self.handle_request_permission,
            methods.FS_READ_TEXT_FILE: read_text_file,
            methods.FS_WRITE_TEXT_FILE: write_text_file,
        }

    async def serve(self, link: Link, converse: Callable[[Peer], Awaitable[int]]) -> int:
        peer = Peer()
        status = EXIT_INTERRUPTED
        try:
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    try:
                        await peer.run(link.frames, link.writer, Dispatcher(self.handlers()))
                    finally:
                        self.closed.set()

                tg.start_soon(read)
                tg.start_soon(self._watch_interrupts, peer)
                with self._conversation:
                    status = await converse(peer)
                await link.close()
                tg.cancel_scope.cancel()
        finally:
            self.display.finish()
            if self._terminal is not None:
                self._terminal.close()
        return status

    async def initialize(self, peer: Peer) -> None:
        init = await peer.request(
            methods.INITIALIZE,
            {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO},
        )
        version = checked(methods.INITIALIZE, InitializeAnswer, init).protocol_version
        if version != PROTOCOL_VERSION:
            raise ValueError(f"it speaks protocol version {version}, this client speaks {PROTOCOL_VERSION}")

    async def caught_up(self, peer: Peer, cwd: str) -> None:
        """Every update a runner sent before it recorded a run's end is shown once this returns:
        it sends them before it records the end, and answers this request after them."""
        if self.closed.is_set():
            return
        with anyio.move_on_after(STARTUP_TIMEOUT), contextlib.suppress(RpcError, PeerClosedError):
            await peer.request(methods.SESSION_LIST, {"cwd": cwd})
        self.display.finish()

    # --- Ctrl-C ----------------------------------------------------------------------------

    async def _watch_interrupts(self, peer: Peer) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as interrupts:
            async for _ in interrupts:
                await self.interrupted(peer)

    async def interrupted(self, peer: Peer) -> None:
        self.abort()

    def abort(self) -> None:
        """Stop the conversation at once (the command then closes its connection)."""
        self._conversation.cancel()

    async def cancel_turn(self, peer: Peer) -> None:
        """`session/cancel`, and every permission question still open answered `cancelled` (ACP)."""
        self.cancelling = True
        self.display.finish()
        await peer.notify(methods.SESSION_CANCEL, {"sessionId": self.session_id})
        for scope in self._asks:
            scope.cancel()

    # --- the server's requests ----------------------------------------------------------

    async def handle_session_update(self, params: dict[str, Any]) -> None:
        """Shown in the order sent: the peer handles notifications one at a time, and an answer
        only after the updates sent before it."""
        if not self.muted:
            self.display.show(params)
            return
        update = params.get("update")
        if isinstance(update, dict) and update.get("sessionUpdate") == "tool_call":  # pyright: ignore[reportUnknownMemberType]
            self.display.tool_title(update)  # pyright: ignore[reportUnknownArgumentType] -- its title, for later lines

    async def handle_request_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        request = parse(RequestPermissionParams, params)  # -32602 naming the fields, if malformed
        if self.cancelling:
            return CANCELLED_OUTCOME
        choice = await self._choose(request.tool_call.model_dump(by_alias=True), request.options)
        if choice is None:
            return CANCELLED_OUTCOME
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def _choose(self, tool: dict[str, Any], options: list[PermissionOption]) -> str | None:
        title, kind = self.display.tool_title(tool), str(tool.get("kind") or "other")
        if self.args.allow or self.args.deny:
            # Answered by the flag, but still shown: what was allowed should never go unseen.
            choice = _pick(options, "allow_once" if self.args.allow else "reject_once", title)
            if choice is not None:
                self.display.finish()
                warn(f"{question(title, kind)}: {'allowed by --allow' if self.args.allow else 'rejected by --deny'}")
            return choice
        if not options:
            warn(f"permission for {title!r}: the server offered no options; cancelling")
            return None
        async with self._ask_lock:
            if self.cancelling:  # the turn was cancelled while an earlier question was open
                return None
            if self._terminal is None:
                self._terminal = Terminal.open()
            if self._terminal is None:
                self.display.finish()
                nobody = NOBODY_TO_ASK.format(command=getattr(self.args, "command", None) or "prompt")
                warn(f"{question(title, kind)}: {nobody}")
                # An error answer, not "reject": the tool's result must not say the user refused.
                raise RpcError(INTERNAL_ERROR, nobody)
            self.display.finish()
            with anyio.CancelScope() as scope:
                self._asks.add(scope)
                try:
                    return await self._terminal.ask(title, kind, options)
                finally:
                    self._asks.discard(scope)
            self._terminal.write("(cancelled)\n")
            return None


def _pick(options: list[PermissionOption], kind: str, title: str) -> str | None:
    """The option of `kind`, else its "always" sibling; None (cancel) when neither is offered."""
    family = kind.split("_")[0]
    for wanted in (kind, f"{family}_always"):
        for option in options:
            if option.kind == wanted:
                return option.option_id
    warn(f"permission for {title!r}: no {family} option offered; cancelling")
    return None


def stop_status(reason: str) -> int:
    if reason not in STOP_REASONS:
        warn(f"error: the server answered with an unknown stop reason {reason[:100]!r}")
        return EXIT_ERROR
    status, note = STOP_REASONS[reason]
    if note is not None:
        warn(f"stopped: {note} ({reason})")
    return status


def turn_failure(exc: Exception) -> str:
    if isinstance(exc, PeerClosedError):
        return "the ACP server exited during the turn"
    if isinstance(exc, RpcError):
        return exc.message
    return f"the ACP server failed the turn: {exc}"


def start_failure(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {STARTUP_TIMEOUT:g} s"
    if isinstance(exc, PeerClosedError):
        return "it exited before answering (its messages, if any, are above)"
    return exc.message if isinstance(exc, RpcError) else str(exc)
