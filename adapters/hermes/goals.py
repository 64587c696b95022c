"""Hermes' standing goals (`/goal`) in acp-server sessions: Hermes' own `GoalManager` (its
states, turn budget, judge and continuation prompts, `hermes_cli.goals`), its goal store routed
here instead of `state.db` and kept in our journal (`Sink.save_state`), its loop driven by
follow-up turns (`Sink.follow_up`): after each turn of a session with an active goal the judge
decides, and a goal not done yet asks for the next turn with Hermes' continuation prompt.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import suppress
from typing import Any

from adapters.base import Sink, SlashCommand, TurnCancelled, TurnInput
from adapters.events import TextContent
from adapters.hermes import transcript
from adapters.hermes.setup import hermes

log = logging.getLogger(__name__)

STATE_KEY = "hermes.goal"  # the session's goal, as Hermes' GoalState.to_json() has it
ORIGIN = "goal"  # what the follow-up turns of a goal are marked with
COMMAND = SlashCommand(
    "goal",
    "Give Hermes a standing goal it works on turn after turn until a judge finds it done, or show, pause, resume "
    "or clear it",
    hint="<goal> | status | pause | resume | clear",
)
RUNTIME_FIELDS = ("provider", "model", "base_url", "api_key", "api_mode", "auth_mode")  # as Hermes binds a turn's
STOPPED = "its loop stopped with the server or the session; /goal resume goes on"


class _Store:
    """Hermes' goal store (`hermes_cli.goals.load_goal` / `save_goal`, which `GoalManager` calls)
    for acp-server sessions: each session's state in memory, for the adapter to journal."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, str] = {}

    def load(self, session_id: str) -> Any:
        with self._lock:
            raw = self._states.get(session_id)
        return None if raw is None else hermes("hermes_cli.goals").GoalState.from_json(raw)

    def save(self, session_id: str, state: Any) -> None:
        with self._lock:
            self._states[session_id] = state.to_json()

    def value(self, session_id: str) -> Any:
        with self._lock:
            raw = self._states.get(session_id)
        return None if raw is None else json.loads(raw)

    def put(self, session_id: str, value: Any) -> None:
        with self._lock:
            self._states[session_id] = json.dumps(value)

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._states.pop(session_id, None)


_store = _Store()
_route_lock = threading.Lock()


def _route_store() -> Any:
    """Hermes' goals module, its store routed to `_store` (once per process: nothing of
    acp-server's sessions goes to HERMES_HOME/state.db)."""
    goals = hermes("hermes_cli.goals")
    with _route_lock:
        if goals.load_goal is not _store.load:
            goals.load_goal, goals.save_goal = _store.load, _store.save
    return goals


def command_args(turn: TurnInput) -> str | None:
    """The arguments of a `/goal` command the user typed, else None."""
    if turn.origin is not None:
        return None
    parts = turn.text.strip().split(None, 1)
    if not parts or parts[0] != f"/{COMMAND.name}":
        return None
    return parts[1].strip() if len(parts) > 1 else ""


class SessionGoal:
    """One session's goal: Hermes' GoalManager over the state the journal has, and what of it
    was journaled. A goal found active when the session is restored has no loop running any
    more (the server stopped, or the session was closed): it is restored paused."""

    def __init__(self, turn: TurnInput) -> None:
        self.session_id = turn.session_id
        goals = _route_store()
        restored = turn.state.get(STATE_KEY)
        if isinstance(restored, dict):
            _store.put(self.session_id, restored)
        else:
            _store.drop(self.session_id)
        self._journaled = _store.value(self.session_id)
        self.manager: Any = goals.GoalManager(self.session_id, default_max_turns=_max_turns())
        if self.manager.is_active():
            self.manager.pause(reason=STOPPED)

    def cancelled(self) -> None:
        """A cancel pauses an active goal (Hermes pauses on Ctrl+C); journaled at the next turn."""
        if self.manager.is_active():
            self.manager.pause(reason="cancelled in the editor")

    def persist(self, sink: Sink) -> None:
        """Journal the goal's state if it changed since it was last journaled."""
        value = _store.value(self.session_id)
        if value != self._journaled:
            sink.save_state(STATE_KEY, value)
            self._journaled = value

    # --- /goal ---------------------------------------------------------------------------

    def command(self, args: str, turn: TurnInput, sink: Sink) -> None:
        """Answer `/goal ...` as Hermes' CLI does; setting or resuming a goal (or asking the
        status of one whose loop goes on) asks for its next turn. The exchange is kept out of
        what Hermes sees next, as Hermes keeps its commands out of the conversation."""
        manager = self.manager
        lower = args.lower()
        if not args or lower == "status":
            answer = manager.status_line()
            keep_going = manager.is_active() and not manager.is_waiting()
            follow = manager.next_continuation_prompt() if keep_going else None
        elif lower == "pause":
            state = manager.pause(reason="user-paused")
            answer, follow = (f"⏸ Goal paused: {state.goal}" if state else "No goal set."), None
        elif lower == "resume":
            state = manager.resume()
            answer = f"▶ Goal resumed ({state.max_turns}-turn budget): {state.goal}" if state else "No goal to resume."
            follow = manager.next_continuation_prompt() if state else None
        elif lower in ("clear", "stop", "done"):
            had = manager.has_goal()
            manager.clear()
            answer, follow = ("✓ Goal cleared." if had else "No active goal."), None
        else:
            answer, follow = self._set(args)
        transcript.keep_out(sink, turn)
        self.persist(sink)
        sink.text(answer)
        if follow:
            sink.follow_up(follow, origin=ORIGIN)

    def _set(self, args: str) -> tuple[str, str | None]:
        headline, contract = hermes("hermes_cli.goals").parse_contract(args)
        try:
            state = self.manager.set(headline or args, contract=None if contract.is_empty() else contract)
        except ValueError as exc:
            return f"Invalid goal: {exc}", None
        answer = f"⊙ Goal set ({state.max_turns}-turn budget): {state.goal}"
        if state.has_contract():
            answer += "\n\nCompletion contract:\n" + state.contract.render_block()
        return answer, state.goal  # the first turn works on the goal itself, as Hermes starts it

    # --- after a turn --------------------------------------------------------------------

    def judge(self, response: str, turn: TurnInput, sink: Sink, *, agent: Any) -> None:
        """Hermes' judge on the turn's answer (a side call on the session's own model and
        endpoint, unless `auxiliary.goal_judge` names others), shown as a tool call whose title
        is the verdict; a goal not done yet asks for its next turn with Hermes' continuation prompt."""
        manager = self.manager
        if not manager.is_active():
            return
        check = sink.tool_call("Checking the goal", kind="think", raw_input={"goal": manager.state.goal})
        goals = hermes("hermes_cli.goals")
        runtime = {name: getattr(agent, name, None) or "" for name in RUNTIME_FIELDS}
        with hermes("agent.auxiliary_client").scoped_runtime_main(runtime):
            decision: dict[str, Any] = manager.evaluate_after_turn(
                response,
                user_initiated=turn.origin is None,
                background_processes=goals.gather_background_processes(task_id=turn.session_id),
            )
        if sink.cancelled:  # cancelled while the judge was asked: no next turn
            self.cancelled()
            return
        state = manager.state
        sink.tool_update(
            check,
            status="completed",
            title=_verdict(decision, state),
            content=[TextContent(str(decision.get("message") or decision.get("reason") or ""))],
            raw_output={
                "verdict": decision.get("verdict"),
                "reason": decision.get("reason"),
                "status": decision.get("status"),
                "turnsUsed": state.turns_used if state else None,
                "maxTurns": state.max_turns if state else None,
            },
        )
        self.persist(sink)
        prompt = decision.get("continuation_prompt")
        if decision.get("should_continue") and isinstance(prompt, str) and prompt:
            sink.follow_up(prompt, origin=ORIGIN)

    def failed(self, sink: Sink) -> None:
        """The turn failed: an active goal pauses (its loop stops with the failure)."""
        if self.manager.is_active():
            self.manager.pause(reason="a turn failed")
            with suppress(TurnCancelled):  # else journaled at the next turn
                self.persist(sink)


def _verdict(decision: dict[str, Any], state: Any) -> str:
    reason = str(decision.get("reason") or "")
    if decision.get("status") == "done":
        return f"goal done: {reason}"
    if decision.get("should_continue"):
        return f"goal: not done yet — {state.turns_used}/{state.max_turns}, continuing"
    if decision.get("status") == "paused":
        return f"goal paused: {state.paused_reason}"
    return f"goal waiting: {reason}"


def _max_turns() -> int:
    """Hermes' `goals.max_turns` from config.yaml (20 by default), as its CLI reads it."""
    default = int(hermes("hermes_cli.goals").DEFAULT_MAX_TURNS)
    try:
        config: dict[str, Any] = hermes("hermes_cli.config").load_config() or {}
        section: dict[str, Any] = config.get("goals") or {}
        return int(section.get("max_turns", default) or default)
    except (TypeError, ValueError, AttributeError):
        return default


class Goals:
    """The goals of every session the adapter serves, each made at its session's first turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, SessionGoal] = {}

    def of(self, turn: TurnInput) -> SessionGoal:
        with self._lock:
            goal = self._sessions.get(turn.session_id)
        if goal is None:
            goal = SessionGoal(turn)  # only this session's turns get here, one at a time
            with self._lock:
                self._sessions[turn.session_id] = goal
        return goal

    def cancelled(self, session_id: str) -> None:
        with self._lock:
            goal = self._sessions.get(session_id)
        if goal is not None:
            goal.cancelled()

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
        _store.drop(session_id)
