"""A turn's link between the runtime's event loop (where the agent's traffic arrives) and the
worker thread that runs the turn (where the sink is).

The loop puts the agent's updates and requests into the link's inbox in the order they arrive,
and the prompt's answer last; the worker takes them in that order, so everything the agent
reported reaches the sink before the request that followed it, and the turn ends after all of
it. The inbox is bounded: while the worker lags (the editor reads slowly), the loop waits for
room, and so does the agent. Answers go back to the loop through `Reply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import field
from typing import Any

from acp_server.rpc.errors import INTERNAL_ERROR, RpcError
from adapters.frozen import frozen

INBOX_ITEMS = 256
CANCELLED_PERMISSION = {"outcome": {"outcome": "cancelled"}}

Json = dict[str, Any]


def unanswerable(method: str) -> Any:
    """The answer to a request of the agent's that no turn will answer (none runs, or it ended):
    a permission or a form is cancelled, anything else refused."""
    if method == "session/request_permission":
        return CANCELLED_PERMISSION
    if method == "elicitation/create":
        return {"action": "cancel"}
    raise RpcError(INTERNAL_ERROR, "No turn is running in this session")


class Reply:
    """The answer to one of the agent's requests, set from any thread, awaited on the loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Any] = self._loop.create_future()

    def result(self, value: Any) -> None:
        self._loop.call_soon_threadsafe(_settle, self._future, value, None)

    def error(self, exc: BaseException) -> None:
        self._loop.call_soon_threadsafe(_settle, self._future, None, exc)

    async def wait(self) -> Any:
        return await self._future


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)


@frozen
class Update:
    update: Json


@frozen
class Ask:
    method: str
    params: Json
    reply: Reply = field(compare=False)


@frozen
class Answered:
    """The agent answered the prompt: its result, or the error it answered (or died with)."""

    result: Any = None
    error: BaseException | None = None


@frozen
class Cancelled:
    """The turn was cancelled: the worker stops waiting for the agent."""


Item = Update | Ask | Answered | Cancelled


class Inbox:
    """Items from the loop to the worker, in order; `put` waits while INBOX_ITEMS are queued."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._items: deque[Item] = deque()
        self._ready = threading.Condition()
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False  # the worker has gone: what arrives now is dropped
        self.cancelled = False  # the turn was cancelled (its prompt is not sent, or is withdrawn)
        self._dozing = False  # the worker waits with a timeout: streamed text need not wake it

    async def put(self, item: Item) -> bool:
        """Queue `item`, waiting for room; False (dropped) once the worker has gone."""
        while len(self._items) >= INBOX_ITEMS and not self.closed:
            self._room.clear()
            await self._room.wait()
        return self.put_nowait(item)

    def put_nowait(self, item: Item) -> bool:
        """For the last items of a turn (its answer, a cancel), which never wait."""
        with self._ready:
            if self.closed:
                return False
            self._items.append(item)
            if not (self._dozing and _streamed(item)):
                self._dozing = False
                self._ready.notify()
        return True

    def cancel(self) -> None:
        """From any thread: the turn is cancelled; the worker stops waiting."""
        self.cancelled = True
        self.put_nowait(Cancelled())

    def put_back(self, items: list[Item]) -> None:
        """Worker side: `items`, taken but not handled, go back to the front of the queue (the
        turn ended before them: `close` answers the questions among them)."""
        with self._ready:
            self._items.extendleft(reversed(items))

    def close(self) -> None:
        """The worker's turn is over: drop what comes, answer what waits, let a `put` go on."""
        with self._ready:
            self.closed = True
            left = [item for item in self._items if isinstance(item, Ask)]
            self._items.clear()
        for ask in left:
            try:
                ask.reply.result(unanswerable(ask.method))
            except RpcError as exc:
                ask.reply.error(exc)
        with contextlib.suppress(RuntimeError):  # the loop has stopped: nobody waits
            self._loop.call_soon_threadsafe(self._room.set)

    def get(self, timeout: float | None = None) -> list[Item]:
        """Every item queued (worker side), in order; blocks until there is one, or `timeout`
        seconds (then none). Taking them all at once lets the worker merge a burst of streamed
        text into one report."""
        with self._ready:
            if not self._items:
                self._dozing = timeout is not None  # text arriving meanwhile waits for the timeout
                self._ready.wait_for(lambda: bool(self._items) and not self._dozing, timeout)
                self._dozing = False
            items = list(self._items)
            self._items.clear()
            full = len(items) >= INBOX_ITEMS
        if full:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._room.set)
        return items


def _streamed(item: Item) -> bool:
    """A chunk of the agent's words or thoughts."""
    return isinstance(item, Update) and item.update.get("sessionUpdate") in STREAMED


STREAMED = frozenset({"agent_message_chunk", "agent_thought_chunk"})
