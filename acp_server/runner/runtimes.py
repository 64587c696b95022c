"""The agent runtimes one runner hosts: its own configuration's, and, started on first use, the
one each stored session was made with (its `launch`: agent and settings, kept in the journal).

A runner serves its journal's sessions, and those were made by whatever agent the server that
made them ran. A session is continued by a runtime built from its own launch, in this runner,
with this runner's other options (journal, workers, permission timeout, terminal); new sessions
get the runner's own agent. A session kept before launches were stored, or one whose launch is
the runner's own, is the runner's own agent's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import anyio

from acp_server.acp.prompting import AgentOptions
from acp_server.acp.sessions import Session, SessionStore
from acp_server.rpc.errors import INTERNAL_ERROR, RpcError
from adapters.base import RuntimeAdapter
from adapters.frozen import frozen
from journal.redact import redact
from journal.store import Journal

log = logging.getLogger(__name__)

# Builds the adapter of a launch (the CLI's registry lookup); raises ValueError or OSError.
AdapterFactory = Callable[[Mapping[str, Any]], RuntimeAdapter]


def launch_key(launch: Mapping[str, Any]) -> str:
    return json.dumps(dict(launch), sort_keys=True, default=str)


@frozen
class Runtime:
    """One agent in the runner: its adapter, its options (with its launch), its live sessions."""

    adapter: RuntimeAdapter
    options: AgentOptions
    sessions: SessionStore

    @property
    def key(self) -> str:
        return launch_key(self.options.launch)


class Runtimes:
    """The runner's own runtime, the others started so far, and which session is whose."""

    def __init__(
        self,
        *,
        adapter: RuntimeAdapter,
        options: AgentOptions,
        journal: Journal,
        adapter_for: AdapterFactory | None = None,
    ) -> None:
        self.journal = journal
        own = SessionStore(journal, adapter_name=adapter.name, launch=options.launch)
        self.primary = own_runtime = Runtime(adapter, options, own)
        # The journal keeps a launch redacted: the runner's own, as kept, is still the runner's own.
        self._by_key: dict[str, Runtime] = {
            launch_key(redact(options.launch)): own_runtime,
            own_runtime.key: own_runtime,
        }
        self._adapter_for = adapter_for
        self._of_session: dict[str, Runtime] = {}
        self._starting = anyio.Lock()

    def all(self) -> list[Runtime]:
        return list({id(runtime): runtime for runtime in self._by_key.values()}.values())

    def all_live(self) -> list[Session]:
        return [session for runtime in self.all() for session in runtime.sessions.all_live()]

    def live(self, session_id: str) -> Session | None:
        return next((s for r in self.all() if (s := r.sessions.live(session_id)) is not None), None)

    async def of(self, session_id: str) -> Runtime:
        """The runtime that continues `session_id` (an unknown session: the runner's own, whose
        handlers then answer -32002)."""
        known = self._of_session.get(session_id)
        if known is not None:
            return known
        record = await self.journal.get_session(session_id)
        launch: dict[str, Any] = record.launch if record is not None else {}
        if not isinstance(launch.get("agent"), str) or self._adapter_for is None:
            runtime = self.primary  # kept before launches were: continued as the runner's own
        else:
            runtime = await self._runtime(launch)
        if record is not None:
            self._of_session[session_id] = runtime
        return runtime

    async def _runtime(self, launch: Mapping[str, Any]) -> Runtime:
        async with self._starting:  # two connections opening sessions of one agent start it once
            key = launch_key(launch)
            found = self._by_key.get(key)
            if found is not None:
                return found
            assert self._adapter_for is not None
            try:
                adapter = await anyio.to_thread.run_sync(self._adapter_for, launch)
            except (ValueError, OSError) as exc:
                agent = launch.get("agent")
                raise RpcError(INTERNAL_ERROR, f"cannot start agent {agent!r} of this session: {exc}") from exc
            options = replace(self.primary.options, launch=dict(launch))
            runtime = Runtime(adapter, options, SessionStore(self.journal, adapter_name=adapter.name, launch=launch))
            self._by_key[key] = runtime
            log.info("started agent %s for the sessions made with it", adapter.name)
            return runtime
