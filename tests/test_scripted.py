"""The echo and scripted agents, played against a sink that records every call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.base import (
    AdapterCapabilities,
    AgentError,
    CommandResult,
    PermissionDecision,
    Sink,
    ToolRefused,
    TurnCancelled,
    TurnInput,
)
from adapters.echo import EchoAdapter
from adapters.events import DiffContent, PlanEntry, TerminalContent, TextContent
from adapters.registry import create_adapter
from adapters.scripted import COMMAND_TIMEOUT, ScriptedAdapter, ScriptError

CWD = "/work/project"


@dataclass
class RecordingSink:
    """Records `(method, args)` for every report and ask; answers from its fields."""

    decision: PermissionDecision = field(default_factory=lambda: PermissionDecision(True))
    file_text: str = "file text"
    old_text: str | None = None
    command: CommandResult = field(default_factory=lambda: CommandResult("ok\n", 0))
    refuse: str | None = None  # a method name that raises ToolRefused
    cancel_after: str | None = None  # a method name after which the turn counts as cancelled
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    cancelled: bool = False
    _tool_ids: int = 0

    def _record(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))
        if method == self.refuse:
            raise ToolRefused(f"{method} refused: outside the workspace")
        if method == self.cancel_after:
            self.cancelled = True

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise TurnCancelled()

    def sleep(self, seconds: float) -> None:
        self._record("sleep", seconds)

    def text(self, text: str) -> None:
        self._record("text", text)

    def thought(self, text: str) -> None:
        self._record("thought", text)

    def tool_call(
        self,
        title: str,
        *,
        kind: str = "other",
        name: str | None = None,
        raw_input: Any = None,
        locations: Sequence[str] = (),
    ) -> str:
        self._record("tool_call", title, kind, raw_input)
        self._tool_ids += 1
        return f"tool-{self._tool_ids}"

    def tool_update(
        self,
        tool_call_id: str,
        *,
        status: str | None = None,
        title: str | None = None,
        content: Sequence[Any] | None = None,
        raw_output: Any = None,
    ) -> None:
        shown = None if content is None else list(content)
        self._record("tool_update", tool_call_id, status, shown, raw_output)

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        self._record("plan", list(entries))

    def usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        context_used: int | None = None,
        context_size: int | None = None,
    ) -> None:
        self._record("usage", input_tokens, output_tokens, cost_usd, context_used, context_size)

    def title(self, title: str) -> None:
        self._record("title", title)

    def save_transcript(self, format: str, messages, *, base: bool = False) -> None:
        self._record("save_transcript", format, list(messages), base)

    def save_state(self, key: str, value) -> None:
        self._record("save_state", key, value)

    def follow_up(self, prompt: str, *, origin: str) -> None:
        self._record("follow_up", prompt, origin)

    def compaction(self, compaction_id: str, status: str, *, summary=None, error=None) -> None:
        self._record("compaction", compaction_id, status, summary, error)

    def compaction_chunk(self, compaction_id: str, text: str) -> None:
        self._record("compaction_chunk", compaction_id, text)

    def notice(self, title: str, *, severity: str = "info", description=None) -> None:
        self._record("notice", title, severity, description)

    def request_permission(self, tool_call_id: str) -> PermissionDecision:
        self._record("request_permission", tool_call_id)
        return self.decision

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        self._record("read_text_file", path)
        return self.file_text

    def write_text_file(self, path: str, content: str) -> str | None:
        self._record("write_text_file", path, content)
        return self.old_text

    def run_command(
        self, command: str, *, tool_call_id: str | None = None, timeout: float | None = None
    ) -> CommandResult:
        self._record("run_command", command, tool_call_id, timeout)
        return self.command

    def clarify(self, question: str, *, choices=(), tool_call_id: str | None = None) -> str:
        self._record("clarify", question, tuple(choices))
        return choices[0] if choices else "answer"

    def elicit(self, request) -> None:
        self._record("elicit", dict(request))

    def elicitation_complete(self, elicitation_id: str) -> None:
        self._record("elicitation_complete", elicitation_id)


def turn(text: str = "hello") -> TurnInput:
    return TurnInput(session_id="s1", cwd=CWD, prompt=({"type": "text", "text": text},))


def play(
    steps: list[dict[str, Any]], sink: RecordingSink | None = None, **script: Any
) -> tuple[str, list[tuple[str, tuple[Any, ...]]]]:
    """Play one scenario matching "go"; returns the stop reason and the recorded calls."""
    sink = RecordingSink() if sink is None else sink
    adapter = ScriptedAdapter.from_data({"scenarios": [{"match": "go", "steps": steps}], **script})
    return adapter.run_turn(turn("go now"), sink), sink.calls


def started(title: str, kind: str = "other", raw_input: Any = None) -> tuple[str, tuple[Any, ...]]:
    return ("tool_call", (title, kind, raw_input))


def update(
    status: str | None, content: list[Any] | None = None, raw_output: Any = None, *, tid: str = "tool-1"
) -> tuple[str, tuple[Any, ...]]:
    return ("tool_update", (tid, status, content, raw_output))


def script_error(data: Any) -> str:
    with pytest.raises(ScriptError) as caught:
        ScriptedAdapter.from_data(data, source="demo.json")
    return str(caught.value)


# --- echo ---------------------------------------------------------------------------------


def test_the_recording_sink_satisfies_the_sink_protocol():
    assert isinstance(RecordingSink(), Sink)


def test_echo_says_the_prompt_text_once_and_ends_the_turn():
    sink = RecordingSink()
    assert EchoAdapter().run_turn(turn("hi there"), sink) == "end_turn"
    assert sink.calls == [("text", ("hi there",))]


def test_echo_says_nothing_for_an_empty_prompt():
    sink = RecordingSink()
    assert EchoAdapter().run_turn(turn(""), sink) == "end_turn"
    assert sink.calls == []


def test_echo_advertises_default_capabilities_and_ignores_cancel():
    adapter = EchoAdapter()
    assert adapter.name == "echo"
    assert adapter.capabilities() == AdapterCapabilities()
    assert adapter.cancel("s1") is None


# --- scenario choice ----------------------------------------------------------------------


def test_scripted_without_a_file_echoes_the_prompt():
    sink = RecordingSink()
    assert ScriptedAdapter(None).run_turn(turn("ping"), sink) == "end_turn"
    assert sink.calls == [("text", ("ping",))]


def test_scripted_echoes_the_prompt_when_no_scenario_matches():
    adapter = ScriptedAdapter.from_data({"scenarios": [{"match": "deploy", "steps": []}]})
    sink = RecordingSink()
    assert adapter.run_turn(turn("build it"), sink) == "end_turn"
    assert sink.calls == [("text", ("build it",))]


def test_the_first_matching_scenario_plays():
    data = {
        "scenarios": [
            {"match": "zzz", "steps": [{"say": "wrong"}]},
            {"match": "go", "steps": [{"say": "first"}]},
            {"match": "", "steps": [{"say": "catch-all"}]},
        ]
    }
    sink = RecordingSink()
    ScriptedAdapter.from_data(data).run_turn(turn("let's go"), sink)
    assert sink.calls == [("text", ("first",))]


def test_scenarios_load_from_a_file(tmp_path: Path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"scenarios": [{"match": "hi", "steps": [{"say": "yo"}]}]}))
    sink = RecordingSink()
    ScriptedAdapter(path).run_turn(turn("hi"), sink)
    assert sink.calls == [("text", ("yo",))]


# --- simple steps -------------------------------------------------------------------------


def test_say_repeats_its_text_as_separate_chunks():
    assert play([{"say": "a", "repeat": 3}, {"say": "b"}]) == (
        "end_turn",
        [("text", ("a",)), ("text", ("a",)), ("text", ("a",)), ("text", ("b",))],
    )


def test_think_reports_a_thought():
    assert play([{"think": "hmm"}])[1] == [("thought", ("hmm",))]


def test_plan_reports_entries_with_default_status_and_priority():
    fix = {"content": "fix", "status": "in_progress", "priority": "high"}
    steps = [{"plan": [{"content": "read"}, fix]}]
    entries = [PlanEntry("read", "pending", "medium"), PlanEntry("fix", "in_progress", "high")]
    assert play(steps)[1] == [("plan", (entries,))]


def test_sleep_uses_the_cancellable_sink_sleep():
    assert play([{"sleep": 0.25}])[1] == [("sleep", (0.25,))]


def test_title_reports_the_session_title():
    assert play([{"title": "Fixing the build"}])[1] == [("title", ("Fixing the build",))]


def test_usage_maps_to_tokens_cost_and_context_window():
    steps = [{"usage": {"inputTokens": 100, "outputTokens": 20, "costUsd": 0.5}}]
    assert play(steps, contextWindow=1000)[1] == [("usage", (100, 20, 0.5, 120, 1000))]


def test_usage_without_cost_reports_none_and_the_default_window():
    steps = [{"usage": {"inputTokens": 7, "outputTokens": 3}}]
    assert play(steps)[1] == [("usage", (7, 3, None, 10, 200_000))]


def test_capabilities_report_the_context_window():
    adapter = ScriptedAdapter.from_data({"scenarios": [], "contextWindow": 4096})
    assert adapter.name == "scripted"
    assert adapter.capabilities() == AdapterCapabilities(context_window=4096)
    assert ScriptedAdapter(None).capabilities().context_window == 200_000


def test_error_step_raises_agent_error_with_its_message():
    with pytest.raises(AgentError, match=r"^model overloaded$"):
        play([{"say": "before"}, {"error": "model overloaded"}])


@pytest.mark.parametrize("reason", ["end_turn", "max_tokens", "max_turn_requests", "refusal"])
def test_stop_ends_the_turn_at_once_with_its_reason(reason: str):
    assert play([{"say": "a"}, {"stop": reason}, {"say": "never"}]) == (
        reason,
        [("text", ("a",))],
    )


def test_stdout_step_writes_straight_to_process_stdout(capsys: pytest.CaptureFixture[str]):
    assert play([{"stdout": "stray output\n"}]) == ("end_turn", [])
    assert capsys.readouterr().out == "stray output\n"


def test_a_cancelled_turn_stops_before_the_next_step():
    sink = RecordingSink(cancel_after="text")
    with pytest.raises(TurnCancelled):
        play([{"say": "one"}, {"say": "two"}], sink)
    assert sink.calls == [("text", ("one",))]


# --- tools --------------------------------------------------------------------------------


def test_tool_with_only_a_result_completes_with_that_text():
    steps = [{"tool": "Search", "kind": "search", "input": {"q": "x"}, "result": "3 hits"}]
    assert play(steps)[1] == [
        started("Search", "search", {"q": "x"}),
        update("in_progress"),
        update("completed", [TextContent("3 hits")]),
    ]


def test_tool_asks_permission_and_runs_when_allowed():
    assert play([{"tool": "Edit", "kind": "edit", "ask": True, "result": "done"}])[1] == [
        started("Edit", "edit"),
        ("request_permission", ("tool-1",)),
        update("in_progress"),
        update("completed", [TextContent("done")]),
    ]


def test_a_rejected_tool_fails_and_the_turn_goes_on():
    sink = RecordingSink(decision=PermissionDecision(False))
    steps = [{"tool": "Delete", "kind": "delete", "ask": True, "run": "rm x"}, {"say": "ok"}]
    assert play(steps, sink) == (
        "end_turn",
        [
            started("Delete", "delete"),
            ("request_permission", ("tool-1",)),
            update("failed", [TextContent("Permission denied by the user")]),
            ("text", ("ok",)),
        ],
    )


def test_a_rejected_tool_shows_the_reason_given():
    sink = RecordingSink(decision=PermissionDecision(False, reason="Not today"))
    calls = play([{"tool": "Delete", "ask": True}], sink)[1]
    assert calls[-1] == update("failed", [TextContent("Not today")])


def test_read_file_shows_the_file_text():
    sink = RecordingSink(file_text="print('hi')\n")
    assert play([{"tool": "Read main.py", "kind": "read", "read_file": "main.py"}], sink)[1] == [
        started("Read main.py", "read"),
        update("in_progress"),
        ("read_text_file", (f"{CWD}/main.py",)),
        update("completed", [TextContent("print('hi')\n")]),
    ]


def test_write_file_shows_a_diff_with_an_absolute_path():
    sink = RecordingSink(old_text="old\n")
    steps = [{"tool": "Edit", "kind": "edit", "write_file": {"path": "src/../a.py", "content": "new\n"}}]
    assert play(steps, sink)[1] == [
        started("Edit", "edit"),
        ("read_text_file", (f"{CWD}/a.py",)),
        update(None, [DiffContent(path=f"{CWD}/a.py", new_text="new\n", old_text="file text")]),
        update("in_progress"),
        ("write_text_file", (f"{CWD}/a.py", "new\n")),
        update("completed", [DiffContent(path=f"{CWD}/a.py", new_text="new\n", old_text="file text")]),
    ]


def test_write_file_shows_its_diff_before_asking_permission():
    sink = RecordingSink(file_text="old\n", decision=PermissionDecision(False))
    steps = [{"tool": "Edit", "kind": "edit", "ask": True, "write_file": {"path": "a.py", "content": "new\n"}}]
    preview = DiffContent(path=f"{CWD}/a.py", new_text="new\n", old_text="old\n")
    assert play(steps, sink)[1] == [
        started("Edit", "edit"),
        ("read_text_file", (f"{CWD}/a.py",)),
        update(None, [preview]),
        ("request_permission", ("tool-1",)),
        update("failed", [TextContent("Permission denied by the user")]),
    ]


def test_write_file_to_a_new_absolute_path_has_no_old_text():
    sink = RecordingSink(refuse="read_text_file")  # what the sink does for a file that is not there
    steps = [{"tool": "Create", "write_file": {"path": f"{CWD}/new.txt", "content": "x"}}]
    calls = play(steps, sink)[1]
    assert calls[2] == update(None, [DiffContent(f"{CWD}/new.txt", "x", None)])
    assert calls[-1] == update("completed", [DiffContent(f"{CWD}/new.txt", "x", None)])


def test_run_shows_the_terminal_and_output_and_completes_on_exit_zero():
    sink = RecordingSink(command=CommandResult("ok\n", 0, terminal_id="term-1"))
    assert play([{"tool": "Test", "kind": "execute", "run": "pytest"}], sink)[1] == [
        started("Test", "execute"),
        update("in_progress"),
        ("run_command", ("pytest", "tool-1", COMMAND_TIMEOUT)),
        update("completed", [TerminalContent("term-1"), TextContent("ok\n")], {"exitCode": 0}),
    ]


def test_run_fails_the_tool_on_a_non_zero_exit_code():
    sink = RecordingSink(command=CommandResult("boom\n", 2))
    calls = play([{"tool": "Build", "run": "make", "result": "see above"}, {"say": "next"}], sink)
    assert calls == (
        "end_turn",
        [
            started("Build"),
            update("in_progress"),
            ("run_command", ("make", "tool-1", COMMAND_TIMEOUT)),
            update("failed", [TextContent("boom\n"), TextContent("see above")], {"exitCode": 2}),
            ("text", ("next",)),
        ],
    )


def test_a_run_step_gives_its_command_its_own_timeout():
    calls = play([{"tool": "Build", "run": "make", "timeout": 2.5}], RecordingSink())[1]
    assert ("run_command", ("make", "tool-1", 2.5)) in calls


def test_a_refused_operation_fails_the_tool_and_the_turn_goes_on():
    sink = RecordingSink(refuse="read_text_file")
    steps = [{"tool": "Read", "read_file": "notes.txt", "result": "unused"}, {"say": "after"}]
    assert play(steps, sink) == (
        "end_turn",
        [
            started("Read"),
            update("in_progress"),
            ("read_text_file", (f"{CWD}/notes.txt",)),
            update("failed", [TextContent("read_text_file refused: outside the workspace")]),
            ("text", ("after",)),
        ],
    )


def test_a_file_outside_the_workspace_fails_the_tool_before_the_sink_is_asked():
    steps = [{"tool": "Read", "read_file": "/etc/passwd", "ask": True}, {"say": "after"}]
    assert play(steps) == (
        "end_turn",
        [
            started("Read"),
            update("failed", [TextContent(f"Refused: /etc/passwd is outside the session's workspace ({CWD})")]),
            ("text", ("after",)),
        ],
    )


def test_each_tool_call_gets_its_own_id():
    calls = play([{"tool": "A", "ask": True}, {"tool": "B", "ask": True}])[1]
    permissions = [args for method, args in calls if method == "request_permission"]
    assert permissions == [("tool-1",), ("tool-2",)]


# --- file validation ----------------------------------------------------------------------


def scenario_with(step: dict[str, Any]) -> dict[str, Any]:
    return {"scenarios": [{"match": "a", "steps": []}, {"match": "b", "steps": [{"say": "ok"}, step]}]}


def test_an_unknown_step_key_names_file_scenario_step_and_key():
    message = script_error(scenario_with({"say": "hi", "repaet": 2}))
    assert "demo.json: scenarios[1].steps[1]: unknown key 'repaet'" in message.splitlines()


def test_a_bad_tool_kind_is_reported_with_the_allowed_kinds():
    message = script_error(scenario_with({"tool": "T", "kind": "shell"}))
    assert message.startswith("demo.json: scenarios[1].steps[1].kind: Input should be 'read'")


def test_repeat_zero_is_rejected():
    message = script_error(scenario_with({"say": "hi", "repeat": 0}))
    assert "demo.json: scenarios[1].steps[1].repeat: Input should be greater than or equal to 1" in message


def test_a_step_without_an_action_key_lists_the_actions():
    message = script_error({"scenarios": [{"match": "a", "steps": [{"sya": "hi"}]}]})
    assert message == (
        "demo.json: scenarios[0].steps[0]: no action key (keys: 'sya'); a step needs one of "
        "say, think, plan, tool, sleep, error, usage, title, stdout, ask_user, stop"
    )


def test_every_problem_is_reported_one_per_line():
    message = script_error(
        {
            "scenarios": [{"match": "a", "steps": [{"say": "a", "think": "b"}, {"stop": "cancelled"}]}],
            "contextwindow": 5,
        }
    )
    assert message.splitlines() == [
        "demo.json: scenarios[0].steps[0]: a step does one thing, got say and think",
        "demo.json: scenarios[0].steps[1].stop: Input should be 'end_turn', 'max_tokens', "
        "'max_turn_requests' or 'refusal'",
        "demo.json: top level: unknown key 'contextwindow'",
    ]


def test_a_tool_with_two_operations_is_rejected():
    message = script_error(scenario_with({"tool": "T", "read_file": "a", "run": "ls"}))
    assert message == ("demo.json: scenarios[1].steps[1]: a tool does one operation at most, got read_file and run")


def test_a_timeout_without_a_command_is_rejected():
    message = script_error(scenario_with({"tool": "T", "read_file": "a", "timeout": 5}))
    assert message == "demo.json: scenarios[1].steps[1]: timeout is for a tool that runs a command (run)"


def test_strings_are_not_coerced_to_numbers():
    message = script_error(scenario_with({"say": "hi", "repeat": "2"}))
    assert "scenarios[1].steps[1].repeat: Input should be a valid integer" in message


def test_a_missing_file_is_a_script_error_naming_the_file(tmp_path: Path):
    missing = tmp_path / "nope.json"
    with pytest.raises(ScriptError, match=r"nope\.json: cannot read scenario file"):
        ScriptedAdapter(missing)


def test_invalid_json_reports_line_and_column(tmp_path: Path):
    path = tmp_path / "broken.json"
    path.write_text('{"scenarios": [\n  {"match": "a",}\n]}')
    with pytest.raises(ScriptError, match=r"broken\.json: not valid JSON: .* at line 2, column 17"):
        ScriptedAdapter(path)


def test_a_top_level_that_is_not_an_object_is_rejected():
    assert script_error([]) == 'demo.json: the top level must be an object with a "scenarios" list'


# --- registry -----------------------------------------------------------------------------


def test_a_script_for_the_echo_agent_is_rejected():
    with pytest.raises(ValueError, match="only to the scripted agent"):
        create_adapter("echo", script="s.json")
