"""A fake editor: a real ACP client, in memory, against a real server stack.

It speaks JSON-RPC frames with the server through memory streams (no mocks: the server's own
peer, dispatcher, agent and thread bridge run as in production), validates every frame the
server writes against the official schema, records session updates, and answers the
server's requests through handlers a test can replace.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from schema_check import check_agent_frame

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.server import connect

ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]


class RemoteError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class FakeEditor:
    def __init__(self, send: anyio.abc.ObjectSendStream[bytes], tg: anyio.abc.TaskGroup) -> None:
        self._send = send
        self._tg = tg
        self._next_id = 0
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._methods_by_id: dict[Any, str] = {}
        self.frames: list[dict[str, Any]] = []
        self.updates: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.server_requests: list[dict[str, Any]] = []
        self.unsolicited: list[dict[str, Any]] = []
        self._changed = anyio.Event()
        self.handlers: dict[str, ServerRequestHandler] = {
            "session/request_permission": self.allow_once,
            "fs/read_text_file": self.read_file,
            "fs/write_text_file": self.write_file,
        }
        self.terminals: dict[str, subprocess.Popen[bytes]] = {}
        self.terminal_calls: list[str] = []
        self.files_written: list[tuple[str, str]] = []

    # --- sending -------------------------------------------------------------------------

    @property
    def last_id(self) -> int:
        """The id of the last request this editor sent."""
        return self._next_id

    async def send_raw(self, data: bytes) -> None:
        await self._send.send(data)

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
        """Send a request now; the returned task resolves to its response frame."""
        if id is None:
            self._next_id += 1
            id = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._waiting[id] = future
        self._methods_by_id[id] = method
        await self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})

        async def response() -> dict[str, Any]:
            with anyio.fail_after(20):
                return await future

        return asyncio.ensure_future(response())

    async def exchange(self, raw: bytes, *, answer_id: Any = None) -> dict[str, Any]:
        """Send raw bytes and return the frame that answers them (with `answer_id`)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting[answer_id] = future
        await self.send_raw(raw)
        with anyio.fail_after(10):
            return await future

    async def expect_error(self, raw: bytes) -> dict[str, Any]:
        """Send raw bytes that should get an error answer with a null id; return the error."""
        return (await self.exchange(raw))["error"]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # --- conveniences ----------------------------------------------------------------------

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": capabilities if capabilities is not None else {},
            "clientInfo": {"name": "fake-editor", "version": "1"},
        })

    async def new_session(self, cwd: str | os.PathLike[str]) -> str:
        result = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        return result["sessionId"]

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        return await self.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}],
        })

    async def start_prompt(self, session_id: str, text: str) -> asyncio.Task[dict[str, Any]]:
        """Send a prompt now; the returned task resolves to its response frame."""
        return await self.send_request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}],
        })

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
        with open(params["path"], encoding="utf-8") as f:
            return {"content": f.read()}

    async def write_file(self, params: dict[str, Any]) -> dict[str, Any]:
        with open(params["path"], "w", encoding="utf-8") as f:
            f.write(params["content"])
        self.files_written.append((params["path"], params["content"]))
        return {}

    def enable_terminal(self) -> None:
        """Serve terminal/* with real processes, as an editor's terminal would."""
        async def create(params: dict[str, Any]) -> dict[str, Any]:
            tid = f"term-{uuid.uuid4().hex[:8]}"
            self.terminals[tid] = subprocess.Popen(
                [params["command"], *params.get("args", [])], cwd=params.get("cwd"),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
            self.terminal_calls.append("create")
            return {"terminalId": tid}

        async def wait(params: dict[str, Any]) -> dict[str, Any]:
            self.terminal_calls.append("wait_for_exit")
            proc = self.terminals[params["terminalId"]]
            code = await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
            return {"exitCode": code, "signal": None} if code >= 0 else {"exitCode": None, "signal": "SIGKILL"}

        async def output(params: dict[str, Any]) -> dict[str, Any]:
            self.terminal_calls.append("output")
            proc = self.terminals[params["terminalId"]]
            proc.wait()
            text = proc.stdout.read().decode() if proc.stdout else ""
            return {"output": text, "truncated": False, "exitStatus": {"exitCode": proc.returncode}}

        async def kill(params: dict[str, Any]) -> dict[str, Any]:
            self.terminal_calls.append("kill")
            self.terminals[params["terminalId"]].kill()
            return {}

        async def release(params: dict[str, Any]) -> dict[str, Any]:
            self.terminal_calls.append("release")
            proc = self.terminals[params["terminalId"]]
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            return {}

        self.handlers.update({
            "terminal/create": create, "terminal/wait_for_exit": wait, "terminal/output": output,
            "terminal/kill": kill, "terminal/release": release,
        })

    # --- receiving -----------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        assert data.endswith(b"\n"), "every frame ends with a newline"
        for line in data.splitlines():
            frame = json.loads(line)  # raises on anything that is not JSON
            self._receive_frame(frame)
        self._changed.set()

    def _receive_frame(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        if "method" in frame:
            check_agent_frame(frame)
            if "id" in frame:
                self.server_requests.append(frame)
                self._tg.start_soon(self._answer, frame)
            elif frame["method"] == "session/update":
                params = frame["params"]
                self.updates[params["sessionId"]].append(params["update"])
            else:
                self.unsolicited.append(frame)
            return
        request_id = frame.get("id")
        check_agent_frame(frame, self._methods_by_id.get(request_id))
        future = self._waiting.pop(request_id, None)
        if future is None:
            self.unsolicited.append(frame)
        elif not future.done():
            future.set_result(frame)

    async def _answer(self, request: dict[str, Any]) -> None:
        handler = self.handlers.get(request["method"])
        if handler is None:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "Method not found"}}
        else:
            try:
                reply = {"jsonrpc": "2.0", "id": request["id"], "result": await handler(request["params"])}
            except FileNotFoundError:
                reply = {"jsonrpc": "2.0", "id": request["id"],
                         "error": {"code": -32002, "message": "Resource not found"}}
        try:
            await self.send(reply)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the editor closed its side while this answer was still being worked out


class _EditorWriter:
    def __init__(self, editor: FakeEditor) -> None:
        self._editor = editor
        self.closed = anyio.Event()

    async def write(self, data: bytes) -> None:
        self._editor.receive(data)

    async def aclose(self) -> None:
        self.closed.set()


@asynccontextmanager
async def running(agent: AcpAgent, *, max_frame_bytes: int = 64 << 20) -> AsyncIterator[FakeEditor]:
    """Serve `agent` to a fake editor; leaving the block closes the editor's side (EOF)."""
    send, receive = anyio.create_memory_object_stream[bytes](1000)
    peer = connect(agent, max_frame_bytes=max_frame_bytes)

    async def frames() -> AsyncIterator[Any]:
        from acp_server.rpc.wire import Oversized

        async for data in receive:
            if len(data) > max_frame_bytes:
                yield Oversized(len(data))
            else:
                yield data

    async with anyio.create_task_group() as tg:
        editor = FakeEditor(send, tg)
        writer = _EditorWriter(editor)
        tg.start_soon(peer.run, frames(), writer)
        try:
            yield editor
        finally:
            await send.aclose()
        with anyio.fail_after(10):
            await writer.closed.wait()
        tg.cancel_scope.cancel()
