"""A fake editor: a real ACP client, in memory, against a real server stack.

The editor side is the real `Peer` with its own dispatcher serving the server's requests
(permission, fs/*, terminal/*, elicitation) through handlers a test can replace; the server
side is `acp.server.serve` as in production. Every frame the server writes is tapped on its
way to the editor's peer: validated against the official schema and recorded. Tests may also
write raw bytes to the server and read the raw frame that answers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from schema_check import check_agent_frame

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.server import serve
from acp_server.protocol import methods
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import METHOD_NOT_FOUND, REQUEST_CANCELLED, RESOURCE_NOT_FOUND, RpcError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import Frame, Oversized

ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]
CLIENT_METHODS = (
    methods.REQUEST_PERMISSION,
    methods.FS_READ_TEXT_FILE,
    methods.FS_WRITE_TEXT_FILE,
    methods.TERMINAL_CREATE,
    methods.TERMINAL_OUTPUT,
    methods.TERMINAL_WAIT_FOR_EXIT,
    methods.TERMINAL_KILL,
    methods.TERMINAL_RELEASE,
    methods.ELICITATION_CREATE,
)
RESPONSE_TIMEOUT = 20


class RemoteError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class LineWriter:
    """A frame writer into a memory stream, one line per item, as a pipe reader would split them."""

    def __init__(self, send: MemoryObjectSendStream[bytes], tap: Callable[[bytes], None] = lambda line: None) -> None:
        self._send = send
        self._tap = tap
        self.closed = anyio.Event()

    async def write(self, data: bytes) -> None:
        assert data.endswith(b"\n"), "every frame ends with a newline"
        for line in data.splitlines():
            self._tap(line)
            try:
                await self._send.send(line)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise BrokenPipeError("the other side closed its input") from None

    async def aclose(self) -> None:
        self.closed.set()
        await self._send.aclose()


async def limited(receive: MemoryObjectReceiveStream[bytes], max_frame_bytes: int) -> AsyncIterator[Frame]:
    """The frames of a memory stream, lines over the limit replaced by `Oversized`."""
    async with receive:
        async for data in receive:
            yield Oversized(len(data), max_frame_bytes) if len(data) > max_frame_bytes else data


class FakeEditor:
    def __init__(self, to_server: MemoryObjectSendStream[bytes], *, unstable: bool = False) -> None:
        self._to_server = to_server
        self.unstable = unstable  # the server runs with --unstable: frames are checked against that schema
        self.peer = Peer()
        self._sent_ids: list[Any] = []  # of the requests our peer wrote, in order
        self._sent_count = 0  # frames our peer wrote
        self._methods_by_id: dict[Any, str] = {}
        self._raw_waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._responses: dict[Any, dict[str, Any]] = {}
        self._handling: set[anyio.CancelScope] = set()
        self._closing = False
        self.frames: list[dict[str, Any]] = []
        self.updates: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.server_requests: list[dict[str, Any]] = []
        self.unsolicited: list[dict[str, Any]] = []
        self._changed = anyio.Event()
        self.handlers: dict[str, ServerRequestHandler] = {
            methods.REQUEST_PERMISSION: self.allow_once,
            methods.FS_READ_TEXT_FILE: self.read_file,
            methods.FS_WRITE_TEXT_FILE: self.write_file,
        }
        self.terminals: dict[str, subprocess.Popen[bytes]] = {}
        self.terminal_calls: list[str] = []
        self.files_written: list[tuple[str, str]] = []
        self.version = 1  # the ACP version whose schema checks the server's frames (2 after a v2 initialize)

    def dispatcher(self) -> Dispatcher:
        """What our peer serves: updates are recorded, every client method goes to `handlers`."""
        table: dict[str, ServerRequestHandler] = {methods.SESSION_UPDATE: self._record_update}
        for method in CLIENT_METHODS:
            table[method] = self._answerer(method)
        return Dispatcher(table)

    # --- sending -------------------------------------------------------------------------

    @property
    def last_id(self) -> Any:
        """The id of the last request this editor's peer sent."""
        return self._sent_ids[-1] if self._sent_ids else None

    async def send_raw(self, data: bytes) -> None:
        await self._to_server.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode())

    async def request(self, method: str, params: dict[str, Any], *, id: Any = None) -> Any:
        """Send a request and return its result, or raise RemoteError."""
        response = await self.request_raw(method, params, id=id)
        if "error" in response:
            raise RemoteError(response["error"])
        return response["result"]

    async def request_raw(self, method: str, params: Any, *, id: Any = None) -> dict[str, Any]:
        return await (await self.send_request(method, params, id=id))

    async def send_request(self, method: str, params: Any, *, id: Any = None) -> asyncio.Task[dict[str, Any]]:
        """Send a request now (through our peer, or raw with an `id` of the test's choosing);
        the returned task resolves to the response frame the server wrote."""
        if id is not None:
            self._methods_by_id[id] = method
            raw = json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode()
            return asyncio.ensure_future(self._answer(await self._send_expecting(raw, id), RESPONSE_TIMEOUT))
        before = len(self._sent_ids)
        task = asyncio.ensure_future(self._through_peer(method, params, before))
        task.add_done_callback(lambda _: self._changed.set())
        await self.wait_for(lambda: len(self._sent_ids) > before or task.done())
        return task

    async def _through_peer(self, method: str, params: Any, index: int) -> dict[str, Any]:
        with anyio.fail_after(RESPONSE_TIMEOUT):
            with contextlib.suppress(RpcError):  # the frame itself is what the test gets
                await self.peer.request(method, params)
        return self._responses.pop(self._sent_ids[index])

    async def exchange(self, raw: bytes, *, answer_id: Any = None) -> dict[str, Any]:
        """Send raw bytes and return the frame that answers them (with `answer_id`)."""
        return await self._answer(await self._send_expecting(raw, answer_id), 10)

    async def _send_expecting(self, raw: bytes, answer_id: Any) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._raw_waiting[answer_id] = future
        await self.send_raw(raw)
        return future

    @staticmethod
    async def _answer(future: asyncio.Future[dict[str, Any]], timeout: float) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await future

    async def expect_error(self, raw: bytes) -> dict[str, Any]:
        """Send raw bytes that should get an error answer with a null id; return the error."""
        return (await self.exchange(raw))["error"]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification through our peer; returns once it is on the wire."""
        before = self._sent_count
        await self.peer.notify(method, params)
        await self.wait_for(lambda: self._sent_count > before)

    # --- conveniences ----------------------------------------------------------------------

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": capabilities if capabilities is not None else {},
                "clientInfo": {"name": "fake-editor", "version": "1"},
            },
        )

    async def new_session(self, cwd: str | os.PathLike[str]) -> str:
        result = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        return result["sessionId"]

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        return await self.request(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": text}],
            },
        )

    async def start_prompt(self, session_id: str, text: str) -> asyncio.Task[dict[str, Any]]:
        """Send a prompt now; the returned task resolves to its response frame."""
        return await self.send_request(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": text}],
            },
        )

    def kinds(self, session_id: str) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates[session_id]]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.updates[session_id] if u["sessionUpdate"] == kind)

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10) -> Any:
        with anyio.fail_after(timeout):
            while not (value := predicate()):
                self._changed = anyio.Event()
                await self._changed.wait()
            return value

    # --- default answers to the server's requests ------------------------------------------

    def never_answer(self, method: str) -> None:
        """Leave every `method` request from the server unanswered, like a headless client."""

        async def silent(params: dict[str, Any]) -> Any:
            await anyio.Event().wait()

        self.handlers[method] = silent

    async def allow_once(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async def read_file(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"content": await anyio.Path(params["path"]).read_text(encoding="utf-8")}

    async def write_file(self, params: dict[str, Any]) -> dict[str, Any]:
        await anyio.Path(params["path"]).write_text(params["content"], encoding="utf-8")
        self.files_written.append((params["path"], params["content"]))
        return {}

    def _called(self, name: str) -> None:
        self.terminal_calls.append(name)
        self._changed.set()

    def enable_terminal(self) -> None:
        """Serve terminal/* with real processes, as an editor's terminal would."""

        async def create(params: dict[str, Any]) -> dict[str, Any]:
            tid = f"term-{uuid.uuid4().hex[:8]}"
            self.terminals[tid] = await anyio.to_thread.run_sync(
                partial(
                    subprocess.Popen,
                    [params["command"], *params.get("args", [])],
                    cwd=params.get("cwd"),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            )
            self._called("create")
            return {"terminalId": tid}

        async def wait(params: dict[str, Any]) -> dict[str, Any]:
            self._called("wait_for_exit")
            proc = self.terminals[params["terminalId"]]
            code = await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
            return {"exitCode": code, "signal": None} if code >= 0 else {"exitCode": None, "signal": "SIGKILL"}

        async def output(params: dict[str, Any]) -> dict[str, Any]:
            self._called("output")
            proc = self.terminals[params["terminalId"]]
            proc.wait()
            text = proc.stdout.read().decode() if proc.stdout else ""
            return {"output": text, "truncated": False, "exitStatus": {"exitCode": proc.returncode}}

        async def kill(params: dict[str, Any]) -> dict[str, Any]:
            self._called("kill")
            self.terminals[params["terminalId"]].kill()
            return {}

        async def release(params: dict[str, Any]) -> dict[str, Any]:
            self._called("release")
            proc = self.terminals[params["terminalId"]]
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            return {}

        self.handlers.update(
            {
                "terminal/create": create,
                "terminal/wait_for_exit": wait,
                "terminal/output": output,
                "terminal/kill": kill,
                "terminal/release": release,
            }
        )

    # --- our peer's handlers ---------------------------------------------------------------

    async def _record_update(self, params: dict[str, Any]) -> None:
        self.updates[params["sessionId"]].append(params["update"])
        self._changed.set()

    def _answerer(self, method: str) -> ServerRequestHandler:
        async def answer(params: dict[str, Any]) -> Any:
            handler = self.handlers.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            if self._closing:
                raise RpcError(REQUEST_CANCELLED, "The editor is closing")
            with anyio.CancelScope() as scope:
                self._handling.add(scope)
                try:
                    return await handler(params)
                except FileNotFoundError:
                    raise RpcError(RESOURCE_NOT_FOUND, "Resource not found") from None
                finally:
                    self._handling.discard(scope)
            raise RpcError(REQUEST_CANCELLED, "The editor is closing")

        return answer

    def close(self) -> None:
        """The server has gone: stop answering it, so our peer winds down at once."""
        self._closing = True
        for scope in self._handling:
            scope.cancel()

    # --- the taps ------------------------------------------------------------------------

    def sent(self, line: bytes) -> None:
        """A frame our peer wrote to the server."""
        message = json.loads(line)
        if "method" in message and "id" in message:
            self._methods_by_id[message["id"]] = message["method"]
            self._sent_ids.append(message["id"])
        self._sent_count += 1
        self._changed.set()

    def received(self, line: bytes) -> None:
        """A frame the server wrote, on its way to our peer."""
        frame = json.loads(line)  # raises on anything that is not JSON
        self.frames.append(frame)
        if "method" in frame:
            check_agent_frame(frame, version=self.version, unstable=self.unstable)
            if "id" in frame:
                self.server_requests.append(frame)
            elif frame["method"] != methods.SESSION_UPDATE:
                self.unsolicited.append(frame)
        else:
            self._receive_response(frame)
        self._changed.set()

    def _receive_response(self, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        check_agent_frame(frame, self._methods_by_id.get(request_id), version=self.version, unstable=self.unstable)
        future = self._raw_waiting.pop(request_id, None)
        if future is not None:
            if not future.done():
                future.set_result(frame)
        elif request_id in self._methods_by_id:
            self._responses[request_id] = frame
        else:
            self.unsolicited.append(frame)


@asynccontextmanager
async def running(agent: AcpAgent, *, max_frame_bytes: int = 64 << 20) -> AsyncIterator[FakeEditor]:
    """Serve `agent` to a fake editor; leaving the block closes the editor's side (EOF)."""
    to_server, server_input = anyio.create_memory_object_stream[bytes](1000)
    to_editor, editor_input = anyio.create_memory_object_stream[bytes](1000)
    editor = FakeEditor(to_server, unstable=agent.options.unstable)
    server_output = LineWriter(to_editor, editor.received)
    editor_output = LineWriter(to_server.clone(), editor.sent)
    editor_done = anyio.Event()

    async def run_editor() -> None:
        try:
            await editor.peer.run(limited(editor_input, 1 << 30), editor_output, editor.dispatcher())
        finally:
            editor_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve, agent, limited(server_input, max_frame_bytes), server_output)
        tg.start_soon(run_editor)
        try:
            yield editor
        finally:
            await to_server.aclose()
            await editor_output.aclose()
        with anyio.fail_after(10):
            await server_output.closed.wait()
        editor.close()  # the editor's peer still handles what the server wrote before it left
        with anyio.fail_after(10):
            await editor_done.wait()
        tg.cancel_scope.cancel()


def answer_permissions(*options: str) -> ServerRequestHandler:
    """An editor's `session/request_permission` handler that picks these option ids, in turn."""
    queue = list(options)

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": queue.pop(0)}}

    return answer
