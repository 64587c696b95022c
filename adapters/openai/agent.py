"""`OpenAIAdapter`: a synchronous coding agent for any Chat Completions endpoint.

A turn sends the conversation with the built-in tools, streams the answer to the sink, runs
the tool calls it asks for (through the permission policy) and asks again, until the model
stops, refuses, runs out of tokens or the request limit is reached. `cancel` cuts the
in-flight HTTP stream from the server's thread. Settings are resolved in `config`. What only
a turn uses (tools, requests, the stream parser, MCP) is imported by the first turn, so that
a server starts without it (docs/performance.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from contextlib import closing
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from adapters.base import AdapterCapabilities, AgentError, Health, Sink, TurnInput
from adapters.events import StopReason
from adapters.mcp_client import mcp_available
from adapters.openai import context
from adapters.openai.client import Abort, Endpoint
from adapters.openai.config import load_settings
from adapters.openai.jsonvalues import is_object
from adapters.openai.models import ModelCatalog, config_options
from adapters.openai.setup import SETUP_COMMAND, SETUP_METHOD

if TYPE_CHECKING:
    from adapters.openai.compaction import Compactor
    from adapters.openai.history import History
    from adapters.openai.mcp_tools import McpTools
    from adapters.openai.request import Request
    from adapters.openai.stream import Reply
    from adapters.openai.tools import Tool, Workspace

HEALTH_TIMEOUT = 1.0
KEYED_HOSTS = ("api.openai.com", "openrouter.ai")  # endpoints that never work without a key


class OpenAIAdapter:
    """The `openai` agent; one instance serves every session of the server."""

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> None:
        self._sources = ({"model": model, "base_url": base_url, "api_key": api_key}, env, config_file)
        self.settings = load_settings(flags=self._sources[0], env=env, config_file=config_file)
        self._endpoint = Endpoint(self.settings.base_url, self.settings.api_key, hint=self.settings.shown_path)
        self._catalog = ModelCatalog(self._endpoint)
        self._lock = threading.Lock()
        self._in_flight: dict[str, Abort] = {}
        self._costs: dict[str, float] = {}
        self._mcp: dict[str, McpTools] = {}  # session id -> its MCP connections, kept across turns
        self._learned: dict[str, int] = {}  # model -> characters below those of a request refused as too long
        self._estimates: dict[str, tuple[str, context.Estimate]] = {}  # session id -> (model, its estimate)

    # --- what the server asks before any turn ------------------------------------------

    def capabilities(self) -> AdapterCapabilities:
        listed = [] if self._config_problem() else self._catalog.ids()
        model = self._default_model(listed)
        return AdapterCapabilities(
            streaming=True,
            image=self._vision(model),
            embedded_context=True,
            context_window=self._window(model),
            config_options=config_options(model, listed),
            cancel_latency=1.0,
            mcp_http=mcp_available(),
            auth_methods=(SETUP_METHOD,),
            system_prompt=True,
            system_prompt_override=True,
        )

    def auth_needed(self) -> str | None:
        """Why no session can work until the user sets a key (`acp-server setup` does), or None;
        a key saved since (by setup in the editor's terminal) is picked up here."""
        self._reload_when_unconfigured()
        return self._missing_key()

    def health(self) -> Health:
        """Configuration and a quick GET /models; settings come with their sources."""
        shown = self.settings.display()
        if (problem := self._config_problem()) is not None:
            return Health(False, problem, shown)
        try:
            ids = [entry["id"] for entry in self._endpoint.list_models(timeout=HEALTH_TIMEOUT)]
        except AgentError as exc:
            return Health(False, str(exc), shown)
        model = self._default_model(ids)
        if model is None:
            return Health(False, self._no_model_message(), shown)
        if self.settings.model is None:
            shown["model"] = (model, "the endpoint's first listed model")
        detail = f"{self.settings.base_url} answered with {len(ids)} models; using {model}"
        if ids and model not in ids:
            detail += f" (not among the models the endpoint lists: {_sample(ids)})"
        return Health(True, detail, shown)

    # --- a turn --------------------------------------------------------------------------

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        self._reload_when_unconfigured()
        if (problem := self._config_problem()) is not None:
            raise AgentError(problem)
        model = self._model_for(turn)
        abort = Abort()
        with self._lock:
            self._in_flight[turn.session_id] = abort
        try:
            return self._loop(turn, sink, model, abort)
        finally:
            with self._lock:
                if self._in_flight.get(turn.session_id) is abort:
                    del self._in_flight[turn.session_id]

    def cancel(self, session_id: str) -> None:
        with self._lock:
            abort = self._in_flight.get(session_id)
        if abort is not None:
            abort.abort()

    def close_session(self, session_id: str) -> None:
        """The session ended (called after its turns have): disconnect its MCP servers."""
        with self._lock:
            mcp = self._mcp.pop(session_id, None)
            self._estimates.pop(session_id, None)
        if mcp is not None:
            mcp.close()

    def close(self) -> None:
        """Release the HTTP connections and every session's MCP connections (the server may
        simply exit instead: the connections' threads are daemons)."""
        with self._lock:
            held, self._mcp = list(self._mcp.values()), {}
        for mcp in held:
            mcp.close()
        self._endpoint.close()

    def _loop(self, turn: TurnInput, sink: Sink, model: str, abort: Abort) -> StopReason:
        from adapters.openai.tools import BUILTIN_TOOLS

        mcp_tools = self._mcp_tools(turn, sink)
        tools: dict[str, Tool] = {tool.name: tool for tool in (*BUILTIN_TOOLS, *mcp_tools)}
        return self._requests(turn, sink, model, abort, tools)

    def _mcp_tools(self, turn: TurnInput, sink: Sink) -> list[Tool]:
        """The session's MCP tools: connected by the first turn that needs them, reused by later
        turns, and reconnected when the servers changed or a connected one went away."""
        with self._lock:
            current = self._mcp.get(turn.session_id)
        if current is not None and current.alive and current.serves(turn.mcp_servers, turn.cwd):
            return current.tools
        if current is not None:
            with self._lock:
                if self._mcp.get(turn.session_id) is current:
                    del self._mcp[turn.session_id]
            current.close()
        if not turn.mcp_servers:
            return []
        from adapters.openai.mcp_tools import McpTools

        fresh = McpTools(turn.mcp_servers, turn.cwd)
        fresh.connect(sink)  # closes what it opened if the turn is cancelled meanwhile
        with self._lock:
            self._mcp[turn.session_id] = fresh
        return fresh.tools

    def _requests(self, turn: TurnInput, sink: Sink, model: str, abort: Abort, tools: Mapping[str, Tool]) -> StopReason:
        """The turn's history and its requests, on the session's calibrated estimate (kept for
        its next turn); the fixed part is terse when the model's window is small."""
        from adapters.haui_contract import RESPONSE_STYLE_OPTION, style_context
        from adapters.openai.attachments import user_message
        from adapters.openai.history import History
        from adapters.openai.prefix import fixed_part
        from adapters.openai.request import Request
        from adapters.openai.tools import Workspace

        budget = self.budget(model, context.DEFAULT)
        system, schemas = fixed_part(tools.values(), turn.cwd, turn.additional_directories, budget=budget)
        history = History.resume(turn.transcript, turn.history, system)
        history.start_turn(user_message(turn.prompt, sink, cwd=turn.cwd, roots=turn.additional_directories))
        history.style = style_context(str(turn.config.get(RESPONSE_STYLE_OPTION, "plain")))
        history.instructions = turn.system_prompt
        with self._lock:
            known_model, estimate = self._estimates.get(turn.session_id, (model, context.DEFAULT))
        request = Request(
            self, turn, sink, model, abort, schemas, estimate if known_model == model else context.DEFAULT
        )
        try:
            return self._rounds(request, history, Workspace(sink, turn.cwd, turn.additional_directories), tools)
        finally:
            with self._lock:
                self._estimates[turn.session_id] = (model, request.estimate)

    def _rounds(
        self, request: Request, history: History, workspace: Workspace, tools: Mapping[str, Tool]
    ) -> StopReason:
        """Ask, run the tool calls, ask again: until the model stops or the limit is reached.
        Each finished round is saved to the session's transcript."""
        from adapters.openai.request import Overflow
        from adapters.openai.tools import execute

        sink = request.sink
        for _ in range(self.settings.max_turn_requests):
            sink.check_cancelled()
            try:
                reply = request.send(history)
            except Overflow as exc:
                history.save(sink)
                sink.text(str(exc))
                return "max_tokens"
            self._report_usage(request.turn.session_id, reply, request.model, sink)
            calls = [] if reply.refused or reply.finish_reason == "length" else reply.tool_calls()
            message = reply.message()
            if not calls:
                message.pop("tool_calls", None)  # a call cut off mid-stream cannot be answered
                history.add(message)
                history.save(sink)
                return "refusal" if reply.refused else "max_tokens" if reply.finish_reason == "length" else "end_turn"
            history.add(message)
            for call in calls:
                result = execute(call, tools.get(call.name), workspace)
                history.add({"role": "tool", "tool_call_id": call.id, "content": result})
            history.save(sink)
        return "max_turn_requests"

    def complete(self, payload: dict[str, Any], sink: Sink, abort: Abort) -> Reply:
        from adapters.openai.stream import Reply

        reply = Reply()
        with closing(self._endpoint.stream_chat(payload, sink=sink, abort=abort)) as chunks:
            for chunk in chunks:
                reply.feed(chunk, sink)
        return reply

    def payload(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        # Stable fields first and the growing conversation last, so the body's bytes share their
        # start with the previous request's, as the prompt the provider renders (tools, system,
        # conversation) does.
        payload: dict[str, Any] = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
        if self.settings.temperature is not None:
            payload["temperature"] = self.settings.temperature
        effort = config.get("reasoning_effort")
        if isinstance(effort, str) and effort != "default":
            payload["reasoning_effort"] = effort
        return payload | {"tools": tools, "messages": messages}

    def compactor(self, turn: TurnInput, sink: Sink, model: str, abort: Abort) -> Compactor:
        from adapters.openai.compaction import Compactor

        return Compactor(
            endpoint=self._endpoint, model=model, sink=sink, editor=turn.editor, abort=abort, window=self._window(model)
        )

    def _report_usage(self, session_id: str, reply: Reply, model: str, sink: Sink) -> None:
        usage = reply.usage
        if not usage:
            return
        prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        cost = usage.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            # ACP's usage_update carries the session's cumulative cost.
            self._costs[session_id] = self._costs.get(session_id, 0.0) + float(cost)
        sink.usage(
            input_tokens=prompt,
            output_tokens=completion,
            cost_usd=self._costs.get(session_id),
            context_used=prompt + completion,
            context_size=self._window(model),
            cached_read_tokens=cached_tokens(usage),
        )

    def learn_budget(self, model: str, chars: int) -> None:
        """The endpoint refused a request as too long: stay below `chars` of requests."""
        with self._lock:
            self._learned[model] = min(chars, self._learned.get(model, chars))

    def budget(self, model: str, estimate: context.Estimate) -> int | None:
        """The tokens a request for `model` may take, when its window is known or was learnt."""
        window = self._window(model)
        with self._lock:
            learned = self._learned.get(model)
        limits = [context.budget_of(window)] if window is not None else []
        limits += [estimate.tokens_for(learned)] if learned is not None else []
        return min(limits) if limits else None

    # --- settings ------------------------------------------------------------------------

    def _config_problem(self) -> str | None:
        """Why no request can work as configured, or None."""
        if self.settings.problems:
            return "The openai agent is misconfigured: " + "; ".join(self.settings.problems)
        return self._missing_key()

    def _missing_key(self) -> str | None:
        host = urlsplit(self.settings.base_url).hostname or ""
        if not self.settings.api_key and any(host == h or host.endswith("." + h) for h in KEYED_HOSTS):
            return (
                f"No API key for {self.settings.base_url}. Set OPENAI_API_KEY or api_key in "
                f"[openai] of {self.settings.shown_path}, or run `acp-server {SETUP_COMMAND}`."
            )
        return None

    def _reload_when_unconfigured(self) -> None:
        """Read the settings again while they cannot work: setup may have saved them since."""
        if self._config_problem() is None:
            return
        flags, env, config_file = self._sources
        fresh = load_settings(flags=flags, env=env, config_file=config_file)
        if fresh == self.settings:
            return
        endpoint = Endpoint(fresh.base_url, fresh.api_key, hint=fresh.shown_path)
        with self._lock:
            old, self.settings, self._endpoint = self._endpoint, fresh, endpoint
            self._catalog = ModelCatalog(endpoint)
        old.close()

    def _default_model(self, listed: list[str]) -> str | None:
        return self.settings.model or (listed[0] if listed else None)

    def _model_for(self, turn: TurnInput) -> str:
        chosen = turn.config.get("model")
        if isinstance(chosen, str) and chosen:
            return chosen
        listed = self._catalog.ids()
        model = self._default_model(listed)
        if model is None:
            raise AgentError(self._catalog.error or self._no_model_message())
        return model

    def _no_model_message(self) -> str:
        return (
            f"No model is configured for {self.settings.base_url}. Pass --model, set ACP_SERVER_MODEL, "
            f"or set model in [openai] of {self.settings.shown_path}."
        )

    def _window(self, model: str | None) -> int | None:
        return self.settings.context_window or self._catalog.window(model)

    def _vision(self, model: str | None) -> bool:
        if self.settings.vision is not None:
            return self.settings.vision
        return self._catalog.vision(model)


def cached_tokens(usage: dict[str, Any]) -> int | None:
    """Prompt tokens served from the provider's cache: OpenAI's `prompt_tokens_details`, or
    DeepSeek's `prompt_cache_hit_tokens`; None when the provider says nothing about it."""
    details = usage.get("prompt_tokens_details")
    if is_object(details) and isinstance(details.get("cached_tokens"), int):
        return _count(details["cached_tokens"])
    hit = usage.get("prompt_cache_hit_tokens")
    return _count(hit) if isinstance(hit, int) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _sample(ids: list[str], limit: int = 5) -> str:
    return ", ".join(ids[:limit]) + (", ..." if len(ids) > limit else "")
