"""The agent threads of a server or a runner: `--max-workers` of them at most, really running.

A turn's worker holds its slot until its thread returns, not until its turn stops waiting for
it: a turn that ignores cancellation is answered `cancelled` after the grace period, but its
thread keeps the slot, so later turns wait for a free thread instead of starting more. A runner
has one `Workers` for all its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable

import anyio

log = logging.getLogger(__name__)


class Workers:
    def __init__(self, size: int) -> None:
        self._size = size
        self._slots = anyio.Semaphore(size)

    async def start(self, work: Callable[[], object]) -> None:
        """Wait for a free slot, then run `work` in a thread of its own that gives the slot back
        when `work` returns (a cancelled wait takes no slot)."""
        if not self._slots.value:
            log.info("all %d agent threads are busy (--max-workers): a turn waits for one", self._size)
        await self._slots.acquire()
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # as anyio's worker threads run their calls

        def run() -> None:
            try:
                context.run(work)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop has closed: no one waits for the slot
                    loop.call_soon_threadsafe(self._slots.release)

        try:
            # A daemon: a thread that ignores cancellation must not keep a stopping server alive.
            threading.Thread(target=run, name="agent-turn", daemon=True).start()
        except BaseException:
            self._slots.release()
            raise
