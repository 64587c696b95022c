"""`acp-server prompt`: a real ACP client that runs one prompt against a server subprocess.

It starts `python -m acp_server` with pipes, speaks JSON-RPC to it through the same `Peer` the
server uses, serves the server's `fs/*` and permission requests from the local disk and
terminal, renders the streamed `session/update`s on stdout as they arrive, and turns the
prompt's stop reason into an exit status. Ctrl-C cancels the turn; a second one quits.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

import acp_server
from acp_server.cli.display import Display
from acp_server.cli.settings import server_args
from acp_server.protocol import methods
from acp_server.protocol.answers import (
    InitializeAnswer,
    MalformedAnswerError,
    NewSessionAnswer,
    PermissionOption,
    PromptAnswer,
    ReadTextFileParams,
    RequestPermissionParams,
    WriteTextFileParams,
    parse_answer,
)
from acp_server.protocol.models import WireModel, parse
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import INTERNAL_ERROR, RESOURCE_NOT_FOUND, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import FrameWriter, PipeWriter, read_frames
from acp_server.turns.files import replace_text, slice_lines
from adapters.base import ToolRefused

PROTOCOL_VERSION = 1
CLIENT_INFO = {"name": "acp-server-prompt", "version": acp_server.__version__}
CLIENT_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}}
STARTUP_TIMEOUT = 30.0  # seconds for initialize + session/new together
REAP_GRACE = 5.0  # seconds the server gets to exit after its stdin closes

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
NOBODY_TO_ASK = "nobody could be asked: acp-server prompt has no terminal; run it with --allow or --deny"

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
A = TypeVar("A", bound=WireModel)


class ServerAnswerError(Exception):
    """The server answered one of our requests with something that does not match the schema."""


def _checked(method: str, answer: type[A], result: Any) -> A:
    try:
        return parse_answer(answer, result)
    except MalformedAnswerError as exc:
        raise ServerAnswerError(f"its answer to {method} was malformed: {exc}") from None


def run_prompt_command(args: argparse.Namespace) -> int:
    """Run one prompt turn against a fresh server; the exit status reflects how it ended."""
    command = [sys.executable, "-m", "acp_server", *server_args(args)]
    try:
        # A session of its own, so a Ctrl-C at the terminal reaches only us: we cancel politely.
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        _warn(f"error: cannot start the ACP server ({' '.join(command)}): {exc}")
        return EXIT_STARTUP
    try:
        return anyio.run(_converse_with, args, process, backend="asyncio")
    except KeyboardInterrupt:  # Ctrl-C before the signal receiver was in place
        if process.poll() is None:
            process.kill()
        return EXIT_INTERRUPTED


async def _converse_with(args: argparse.Namespace, process: subprocess.Popen[bytes]) -> int:
    return await PromptClient(args, process).run()


def _warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the conversation ---------------------------------------------------------------------


class PromptClient:
    """One server process, one session, one prompt."""

    def __init__(self, args: argparse.Namespace, process: subprocess.Popen[bytes]) -> None:
        self._args = args
        self._process = process
        self._display = Display(sys.stdout, raw=args.json, color=sys.stdout.isatty())
        self._terminal: Terminal | None = None
        self._ask_lock = anyio.Lock()
        self._asks: set[anyio.CancelScope] = set()
        self._conversation = anyio.CancelScope()
        self._cwd = os.path.abspath(args.cwd)
        self._session_id: str | None = None
        self._turn_running = False
        self._cancelling = False

    def handlers(self) -> dict[str, Handler]:
        return {
            methods.SESSION_UPDATE: self.handle_session_update,
            methods.REQUEST_PERMISSION: self.handle_request_permission,
            methods.FS_READ_TEXT_FILE: read_text_file,
            methods.FS_WRITE_TEXT_FILE: write_text_file,
        }

    async def run(self) -> int:
        assert self._process.stdin is not None and self._process.stdout is not None
        # Our own copy of the write end, so closing it is what gives the server its EOF.
        writer = _ClosingOnce(await PipeWriter.open(os.dup(self._process.stdin.fileno())))
        self._process.stdin.close()
        peer = Peer()
        status = EXIT_INTERRUPTED
        try:
            async with anyio.create_task_group() as tg:
                frames = read_frames(self._process.stdout.fileno(), self._args.max_frame_bytes)
                tg.start_soon(peer.run, frames, writer, Dispatcher(self.handlers()))
                tg.start_soon(self._watch_interrupts, peer)
                with self._conversation:
                    status = await self._converse(peer)
                await writer.aclose()
                await self._reap()
                tg.cancel_scope.cancel()
        finally:
            self._display.finish()
            self._process.stdout.close()
            if self._terminal is not None:
                self._terminal.close()
        return status

    async def _converse(self, peer: Peer) -> int:
        try:
            with anyio.fail_after(STARTUP_TIMEOUT):
                self._session_id = await self._start_session(peer)
        except (PeerClosedError, RpcError, TimeoutError, ValueError, ServerAnswerError) as exc:
            _warn(f"error: the ACP server did not start: {_reason(exc)}")
            return EXIT_STARTUP
        self._turn_running = True
        try:
            result = await peer.request(
                methods.SESSION_PROMPT,
                {
                    "sessionId": self._session_id,
                    "prompt": [{"type": "text", "text": self._args.text}],
                },
            )
            stop_reason = _checked(methods.SESSION_PROMPT, PromptAnswer, result).stop_reason
        except (RpcError, PeerClosedError, ServerAnswerError) as exc:
            # The peer handled every update sent before the answer (or the end) by now.
            self._display.finish()
            _warn(f"error: {_turn_failure(exc)}")
            return EXIT_ERROR
        finally:
            self._turn_running = False
        self._display.finish()
        return _stop_status(stop_reason)

    async def _start_session(self, peer: Peer) -> str:
        init = await peer.request(
            methods.INITIALIZE,
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": CLIENT_CAPABILITIES,
                "clientInfo": CLIENT_INFO,
            },
        )
        version = _checked(methods.INITIALIZE, InitializeAnswer, init).protocol_version
        if version != PROTOCOL_VERSION:
            raise ValueError(f"it speaks protocol version {version}, this client speaks {PROTOCOL_VERSION}")
        session = await peer.request(
            methods.SESSION_NEW,
            {
                "cwd": self._cwd,
                "mcpServers": [],
            },
        )
        return _checked(methods.SESSION_NEW, NewSessionAnswer, session).session_id

    async def _reap(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._process.wait, REAP_GRACE)
        except subprocess.TimeoutExpired:
            _warn(f"the ACP server did not exit within {REAP_GRACE:g} s of its input closing; killing it")
            self._process.kill()
            await anyio.to_thread.run_sync(self._process.wait)

    # --- Ctrl-C ----------------------------------------------------------------------------

    async def _watch_interrupts(self, peer: Peer) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as interrupts:
            async for _ in interrupts:
                if self._turn_running and not self._cancelling:
                    await self._cancel_turn(peer)
                else:
                    self._abort()

    async def _cancel_turn(self, peer: Peer) -> None:
        self._cancelling = True
        self._display.finish()
        _warn("cancelling the turn (press Ctrl-C again to quit at once)")
        await peer.notify(methods.SESSION_CANCEL, {"sessionId": self._session_id})
        # ACP: every permission question still open in a cancelled turn is answered "cancelled".
        for scope in self._asks:
            scope.cancel()

    def _abort(self) -> None:
        self._conversation.cancel()
        if self._process.poll() is None:
            self._process.kill()

    # --- the server's requests ----------------------------------------------------------

    async def handle_session_update(self, params: dict[str, Any]) -> None:
        """Shown in the order sent: the peer handles notifications one at a time, and the
        prompt's answer only after the updates sent before it."""
        self._display.show(params)

    async def handle_request_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        request = parse(RequestPermissionParams, params)  # -32602 naming the fields, if malformed
        if self._cancelling:
            return CANCELLED_OUTCOME
        choice = await self._choose(request.tool_call.model_dump(by_alias=True), request.options)
        if choice is None:
            return CANCELLED_OUTCOME
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def _choose(self, tool: dict[str, Any], options: list[PermissionOption]) -> str | None:
        title, kind = self._display.tool_title(tool), str(tool.get("kind") or "other")
        if self._args.allow or self._args.deny:
            # Answered by the flag, but still shown: what was allowed should never go unseen.
            choice = _pick(options, "allow_once" if self._args.allow else "reject_once", title)
            if choice is not None:
                self._display.finish()
                _warn(f"{_question(title, kind)}: {'allowed by --allow' if self._args.allow else 'rejected by --deny'}")
            return choice
        if not options:
            _warn(f"permission for {title!r}: the server offered no options; cancelling")
            return None
        async with self._ask_lock:
            if self._cancelling:  # the turn was cancelled while an earlier question was open
                return None
            if self._terminal is None:
                self._terminal = Terminal.open()
            if self._terminal is None:
                self._display.finish()
                _warn(f"{_question(title, kind)}: {NOBODY_TO_ASK}")
                # An error answer, not "reject": the tool's result must not say the user refused.
                raise RpcError(INTERNAL_ERROR, NOBODY_TO_ASK)
            self._display.finish()
            with anyio.CancelScope() as scope:
                self._asks.add(scope)
                try:
                    return await self._terminal.ask(title, kind, options)
                finally:
                    self._asks.discard(scope)
            self._terminal.write("(cancelled)\n")
            return None


def _question(title: str, kind: str) -> str:
    return f"Permission requested: {title} ({kind})"


def _pick(options: list[PermissionOption], kind: str, title: str) -> str | None:
    """The option of `kind`, else its "always" sibling; None (cancel) when neither is offered."""
    family = kind.split("_")[0]
    for wanted in (kind, f"{family}_always"):
        for option in options:
            if option.kind == wanted:
                return option.option_id
    _warn(f"permission for {title!r}: no {family} option offered; cancelling")
    return None


def _stop_status(reason: str) -> int:
    if reason not in STOP_REASONS:
        _warn(f"error: the server answered with an unknown stop reason {reason[:100]!r}")
        return EXIT_ERROR
    status, note = STOP_REASONS[reason]
    if note is not None:
        _warn(f"stopped: {note} ({reason})")
    return status


def _turn_failure(exc: Exception) -> str:
    if isinstance(exc, PeerClosedError):
        return "the ACP server exited during the turn"
    if isinstance(exc, RpcError):
        return exc.message
    return f"the ACP server failed the turn: {exc}"


def _reason(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {STARTUP_TIMEOUT:g} s"
    if isinstance(exc, PeerClosedError):
        return "it exited before answering (its messages, if any, are above)"
    return exc.message if isinstance(exc, RpcError) else str(exc)


class _ClosingOnce:
    """A frame writer we may close early (EOF for the server) and the peer may close again."""

    def __init__(self, inner: FrameWriter) -> None:
        self._inner = inner
        self._closed = False

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise BrokenPipeError("the server's input is closed")
        await self._inner.write(data)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._inner.aclose()


# --- the local file system ----------------------------------------------------------------


async def read_text_file(params: dict[str, Any]) -> dict[str, Any]:
    """`fs/read_text_file`: the file's text, from 1-based `line` for at most `limit` lines."""
    request = parse(ReadTextFileParams, params)  # -32602 naming the fields, if malformed
    text = await anyio.to_thread.run_sync(_read, request.path)
    return {"content": slice_lines(text, request.line, request.limit)}


async def write_text_file(params: dict[str, Any]) -> dict[str, Any]:
    """`fs/write_text_file`: creates or replaces the file (and missing parent directories)."""
    request = parse(WriteTextFileParams, params)
    await anyio.to_thread.run_sync(_write, request.path, request.content)
    return {}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {path}", {"uri": path}) from None
    except UnicodeDecodeError:
        raise RpcError(INTERNAL_ERROR, f"Cannot read {path}: not UTF-8 text") from None
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"Cannot read {path}: {exc.strerror or exc}") from None


def _write(path: str, content: str) -> None:
    try:
        replace_text(path, content)
    except ToolRefused as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


# --- asking on the terminal ---------------------------------------------------------------


class Terminal:
    """Where permission questions go: stdin and stderr when stdin is a terminal, else /dev/tty."""

    def __init__(self, fd: int, *, owned: bool) -> None:
        self._fd = fd
        self._owned = owned

    @classmethod
    def open(cls) -> Terminal | None:
        if sys.stdin.isatty():
            return cls(sys.stdin.fileno(), owned=False)
        try:
            return cls(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY), owned=True)
        except OSError:
            return None

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)

    def write(self, text: str) -> None:
        if self._owned:
            os.write(self._fd, text.encode())
        else:
            sys.stderr.write(text)
            sys.stderr.flush()

    async def ask(self, title: str, kind: str, options: list[PermissionOption]) -> str | None:
        """The chosen optionId; None when the terminal reached end of input."""
        menu = "".join(f"  {n}) {o.name or o.option_id}\n" for n, o in enumerate(options, 1))
        self.write(f"{_question(title, kind)}\n{menu}")
        while True:
            self.write(f"Choose 1-{len(options)}: ")
            answer = await self._read_line()
            if answer is None:
                self.write("\n")
                return None
            if answer.strip().isdecimal() and 1 <= int(answer) <= len(options):
                return options[int(answer) - 1].option_id
            self.write("Please answer with one of the numbers shown.\n")

    async def _read_line(self) -> str | None:
        # The terminal is in canonical mode: once readable, one read returns the typed line.
        await anyio.wait_readable(self._fd)
        data = os.read(self._fd, 4096)
        return data.decode(errors="replace") if data else None
