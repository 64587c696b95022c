"""`HermesAdapter`: Hermes' own `AIAgent` as an acp-server agent.

One AIAgent per session, built on the session's first turn from Hermes' configuration and
reused; a turn binds its callbacks to the sink, runs `run_conversation` on a copy of the
session's messages and keeps a copy of Hermes' full message list afterwards, then, in a session
with an active goal, has Hermes' judge decide on the next turn (`goals`, which answers `/goal`).
`cancel` calls Hermes' `interrupt()` (and pauses a goal); the pending flag is cleared before every
run. See docs/agents/hermes.md.
"""

from __future__ import annotations

import atexit
import copy
import logging
import threading
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any

from adapters.base import AdapterCapabilities, AgentError, Health, Sink, TurnCancelled, TurnInput
from adapters.events import StopReason
from adapters.haui_contract import RESPONSE_STYLE_OPTION, response_style_option, style_context
from adapters.hermes import goals, health, mcp, setup, titles, transcript
from adapters.hermes.reporting import Reporter
from adapters.hermes.routing import Gate, attach, detach
from adapters.hermes.setup import hermes

log = logging.getLogger(__name__)
status_log = logging.getLogger("adapters.hermes.status")  # Hermes' own status lines
WARM_DELAY = 1.0  # seconds the warm-up waits for the editor's first session before it starts anyway
EXIT_WAIT = 10.0  # seconds the process's exit waits for a warm-up under way (its imports take 1-2 s)


@dataclass(slots=True)
class _Session:
    agent: Any  # run_agent.AIAgent
    built_for: tuple[str, tuple[dict[str, Any], ...]]  # the cwd and MCP servers it was built with
    lock: threading.Lock = field(default_factory=threading.Lock)  # held by the running turn


class HermesAdapter:
    """The `hermes` agent; one instance serves every session of the server."""

    name = "hermes"

    def __init__(self, model: str | None = None, *, warm: bool = True) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._building: dict[str, threading.Lock] = {}  # one build per session, however many ask
        self._config_lock = threading.Lock()
        self._config_mcp: mcp.Servers | None = None  # config.yaml's MCP servers, shared by all sessions
        self._asked = threading.Event()  # a session was opened or prompted
        self._goals = goals.Goals()
        self._exiting = threading.Event()
        if warm:
            # Importing Hermes takes seconds; do it while the editor sets up, not in the first prompt.
            self._warming = threading.Thread(target=self._warm_when_asked, name="hermes-import", daemon=True)
            self._warming.start()
            atexit.register(self._stop_warming)

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(
            streaming=True,
            embedded_context=True,
            mcp_http=True,
            cancel_latency=1.0,
            config_options=(response_style_option(),),
            commands=(goals.COMMAND,),
            system_prompt=True,  # append only (`_run`)
        )

    def health(self) -> Health:
        return health.health(self._model)

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        goal = self._goals.of(turn)
        goal.persist(sink)  # a change made between turns (a cancel's pause)
        if (args := goals.command_args(turn)) is not None:
            goal.command(args, turn, sink)
            return "end_turn"
        try:
            session = self._session(turn)
            with session.lock:
                return self._run(session, turn, sink, goal)
        except TurnCancelled:
            raise
        except Exception:
            goal.failed(sink)
            raise

    def cancel(self, session_id: str) -> None:
        self._goals.cancelled(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
        if session is not None:
            session.agent.interrupt("cancelled in the editor")

    def open_session(self, ready: TurnInput) -> None:
        """Build the session's AIAgent while the editor sets up, so the first prompt starts at once."""
        try:
            self._session(ready)
        except AgentError as exc:  # no model configured, say: the first prompt reports it
            log.info("hermes session %s not prepared: %s", ready.session_id, exc)

    def close_session(self, session_id: str) -> None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
            self._building.pop(session_id, None)
        self._goals.close(session_id)
        mcp.close_session(session_id)
        if session is not None:
            with suppress(Exception):  # best effort: the session is gone either way
                hermes("tools.terminal_tool").clear_task_env_overrides(session_id)
                hermes("tools.approval").clear_session(session_id)

    def close(self) -> None:
        """Close every session's MCP servers and config.yaml's (the server may simply exit
        instead: the connections' threads are daemons)."""
        with self._lock:
            sessions = list(self._sessions)
        for session_id in sessions:
            self.close_session(session_id)
        with self._config_lock:
            shared, self._config_mcp = self._config_mcp, None
        if shared is not None:
            shared.connections.close()

    # --- a turn --------------------------------------------------------------------------

    def _run(self, session: _Session, turn: TurnInput, sink: Sink, goal: goals.SessionGoal) -> StopReason:
        agent = session.agent
        mcp.report(turn.session_id, sink)  # MCP servers that did not connect when the agent was built
        reporter = Reporter(sink, cwd=turn.cwd, roots=turn.additional_directories)
        gate = Gate(sink, reporter, cwd=turn.cwd, roots=turn.additional_directories)
        _bind(agent, reporter, gate)
        agent.clear_interrupt()  # a cancel that came after the last run ended must not stop this one
        # Hermes adds this to the system prompt of this run's requests and never stores it: the
        # client's system prompt (append; Hermes' own identity cannot be replaced) and the style.
        style = style_context(str(turn.config.get(RESPONSE_STYLE_OPTION, "plain")))
        client = turn.system_prompt.text if turn.system_prompt is not None else ""
        agent.ephemeral_system_prompt = "\n\n".join(part for part in (client, style) if part) or None
        before = _tokens(agent)
        history = transcript.conversation(turn)
        attach(turn.session_id, gate)
        try:
            result: dict[str, Any] = _in_context(
                turn.session_id,
                gate,
                lambda: agent.run_conversation(
                    user_message=turn.text,
                    conversation_history=copy.deepcopy(history.messages),  # Hermes mutates what it is given
                    task_id=turn.session_id,
                ),
            )
        finally:
            detach(turn.session_id, gate)
            _bind(agent, None, None)
        if sink.cancelled or result.get("interrupted"):
            goal.cancelled()
            return "cancelled"  # not saved: the journal hands this turn back as text (`since`)
        if result.get("failed") and not reporter.streamed:
            raise AgentError(str(result.get("error") or result.get("final_response") or "Hermes failed"))
        with suppress(TurnCancelled):
            transcript.save(sink, history, result.get("messages"))
            final = result.get("final_response")
            if isinstance(final, str) and final and not reporter.streamed:
                sink.text(final)
            _report_usage(agent, before, result, sink)
        final = result.get("final_response")
        if titles.first_exchange(history.messages) and isinstance(final, str):
            titles.name_later(agent, turn, final)
        goal.judge(final if isinstance(final, str) else "", turn, sink, agent=agent)
        return "end_turn"

    def _warm_when_asked(self) -> None:
        """Start the warm-up once the editor opens its first session (WARM_DELAY at the latest):
        the warm-up holds the GIL for seconds, and run alongside `initialize` and `session/new` it
        delayed their answers (0.43 s against 0.32 s to a usable session, median of 8 runs)
        without bringing the first delta any sooner (2.03 s against 2.04 s)."""
        self._asked.wait(WARM_DELAY)
        _warm_up(self._exiting)

    def _stop_warming(self) -> None:
        """At the process's exit (atexit, while threads still run): a warm-up not begun is
        dropped, one under way stops after its current import and is waited for. Left to the
        interpreter's exit, the daemon thread was stopped wherever it was, and inside
        pydantic-core's Rust code that aborts the process ("FATAL: exception not rethrown" as
        the last line an editor or `acp-server prompt` shows)."""
        self._exiting.set()
        self._asked.set()
        self._warming.join(EXIT_WAIT)

    def _session(self, turn: TurnInput) -> _Session:
        """The session's AIAgent, built once; built again (after a running turn) when a load or
        resume gave the session another working directory or other MCP servers."""
        self._asked.set()
        wanted = (turn.cwd, turn.mcp_servers)
        with self._lock:
            session = self._sessions.get(turn.session_id)
            if session is not None and session.built_for == wanted:
                return session
            building = self._building.setdefault(turn.session_id, threading.Lock())
        with building:  # a prompt that arrives while open_session builds waits for that build
            with self._lock:
                session = self._sessions.get(turn.session_id)
            if session is None or session.built_for != wanted:
                with session.lock if session is not None else nullcontext():
                    session = _Session(self._build(turn), wanted)
                with self._lock:
                    self._sessions[turn.session_id] = session
        return session

    def _build(self, turn: TurnInput) -> Any:
        try:
            runtime = setup.resolve(self._model)
        except ValueError as exc:
            raise AgentError(str(exc)) from None
        if not runtime.model:
            raise AgentError(f"Hermes has no model: set model.default in {runtime.home}/config.yaml (`hermes model`)")
        tools = mcp.open_session(turn.session_id, turn.mcp_servers, turn.cwd, self._configured_mcp(runtime))
        try:
            hermes("tools.terminal_tool").register_task_env_overrides(turn.session_id, {"cwd": turn.cwd})
            with tools.registered():  # Hermes copies the tools' schemas from its registry here
                agent = hermes("run_agent").AIAgent(
                    **setup.agent_kwargs(runtime, session_id=turn.session_id, mcp_names=tools.servers)
                )
        except (RuntimeError, ValueError) as exc:
            # Hermes' own word on its configuration ("No LLM provider configured. Run `hermes
            # model`...", the 64K context minimum), for the editor to show as it is.
            mcp.close_session(turn.session_id)
            raise AgentError(str(exc)) from exc
        except BaseException:
            mcp.close_session(turn.session_id)
            raise
        tools.fit(agent)
        setup.detach_state_db(agent, runtime.home)
        agent._print_fn = _status  # Hermes' human-readable output: our log, never stdout
        agent._environment_probe = False  # no toolchain probe lines in later system prompts
        agent.session_cwd = turn.cwd
        return agent

    def _configured_mcp(self, runtime: setup.Runtime) -> mcp.Servers | None:
        """config.yaml's MCP servers, connected by the first build that finds any."""
        with self._config_lock:
            if self._config_mcp is None:
                self._config_mcp = mcp.configured(runtime.config_mcp)
            return self._config_mcp


# What a process's first AIAgent build and first request import: Hermes with its tools, and the
# openai SDK, whose client imports every resource module the first time it is used.
_WARM_IMPORTS = (
    "run_agent",
    "model_tools",
    "hermes_cli.runtime_provider",
    "tools.terminal_tool",
    "openai",
    "openai.resources",
)


def _warm_up(stop: threading.Event | None = None) -> None:
    """Do the once-per-process work of Hermes' first AIAgent build and first request before a
    session needs it: the imports (1.6 s: Hermes 0.8 s, 0.4 s of it model_tools discovering its
    tools; the openai SDK 0.6 s, its resources 0.2 s more) and the tool definitions (0.15 s,
    cached by Hermes per list of toolsets). Not a throw-away AIAgent: its build costs as much as
    a session's own (0.15 s, mostly loading TLS bundles) and would run alongside that build."""
    with suppress(Exception):  # the first turn imports again and reports any real problem
        for module in _WARM_IMPORTS:
            if stop is not None and stop.is_set():
                return
            hermes(module)
        if stop is not None and stop.is_set():
            return
        kwargs = setup.agent_kwargs(setup.resolve(), session_id="warm-up", mcp_names=())
        hermes("model_tools").get_tool_definitions(enabled_toolsets=kwargs["enabled_toolsets"], quiet_mode=True)


def _bind(agent: Any, reporter: Reporter | None, gate: Gate | None) -> None:
    agent.stream_delta_callback = reporter.delta if reporter else None
    agent.reasoning_callback = reporter.reasoning if reporter else None
    agent.tool_start_callback = reporter.tool_started if reporter else None
    agent.tool_complete_callback = reporter.tool_completed if reporter else None
    agent.clarify_callback = gate.clarify if gate else None
    agent.thinking_callback = None  # Hermes' spinner faces are not thoughts
    agent.status_callback = _status_event
    agent.tool_progress_callback = None


def _in_context(session_id: str, gate: Gate, run: Any) -> dict[str, Any]:
    """Run with Hermes' per-thread approval callback and session key set to ours: every risky call
    was already decided by our policy (in the middleware), so Hermes' own prompts and its "smart"
    model-decided approvals are bypassed for this session; approvals.deny still blocks."""
    terminal, approval = hermes("tools.terminal_tool"), hermes("tools.approval")
    context = hermes("gateway.session_context")
    previous = terminal._get_approval_callback()  # no public getter; restored below
    terminal.set_approval_callback(gate.approve)
    # No promise of a result after the turn (a background subagent, a command's completion
    # watch): acp-server starts no turn of its own, so Hermes runs such work within the turn.
    tokens = context.set_session_vars(session_key=session_id, async_delivery=False)
    approval.enable_session_yolo(session_id)
    try:
        return run()
    finally:
        context.clear_session_vars(tokens)
        terminal.set_approval_callback(previous)


def _tokens(agent: Any) -> tuple[int, int]:
    return int(agent.session_prompt_tokens or 0), int(agent.session_completion_tokens or 0)


def _report_usage(agent: Any, before: tuple[int, int], result: dict[str, Any], sink: Sink) -> None:
    """Hermes counts per session; a turn reports its own difference, with the context size."""
    prompt, completion = _tokens(agent)
    if (prompt, completion) == before:
        return
    window = getattr(getattr(agent, "context_compressor", None), "context_length", None)
    cost = result.get("estimated_cost_usd")
    known = result.get("cost_status") not in (None, "unknown") and isinstance(cost, int | float) and cost >= 0
    used = result.get("last_prompt_tokens")
    sink.usage(
        input_tokens=prompt - before[0],
        output_tokens=completion - before[1],
        cost_usd=float(cost) if known else None,  # pyright: ignore[reportArgumentType]
        context_used=used if isinstance(used, int) and used > 0 else None,
        context_size=window if isinstance(window, int) and window > 0 else None,
    )


def _status(*args: Any, **_: Any) -> None:
    status_log.info(" ".join(str(a) for a in args))


def _status_event(*args: Any, **_: Any) -> None:
    status_log.debug("status %s", args)
