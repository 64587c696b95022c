"""A deterministic agent played from a JSON scenario file, for people testing ACP clients.

The whole file is validated up front (unknown keys rejected), so a typo fails at start-up
with the file, scenario and step named rather than halfway through a demo. Each turn plays
the first scenario whose `match` occurs in the prompt, step by step through the sink; when
none matches, the agent echoes the prompt.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from adapters.base import AdapterCapabilities, AgentError, Health, Sink, ToolRefused, TurnInput
from adapters.echo import EchoAdapter
from adapters.events import (
    DiffContent,
    PlanEntry,
    StopReason,
    TerminalContent,
    TextContent,
    ToolContent,
    ToolKind,
    ToolStatus,
)
from adapters.frozen import frozen
from adapters.paths import Target, target

DEFAULT_CONTEXT_WINDOW = 200_000
COMMAND_TIMEOUT = 120.0  # seconds a `run` command may take unless its step says otherwise


class ScriptError(ValueError):
    """A scenario file that cannot be played; the message names the file and the bad spot."""


# --- the file format --------------------------------------------------------------------


class _Model(BaseModel):
    # Strict, so that "repeat": "3" or "ask": "yes" is reported instead of quietly coerced.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SayStep(_Model):
    say: str
    repeat: int = Field(default=1, ge=1)


class ThinkStep(_Model):
    think: str


class PlanItem(_Model):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class PlanStep(_Model):
    plan: list[PlanItem]


class WriteFile(_Model):
    path: str
    content: str


class ToolStep(_Model):
    tool: str
    name: str | None = None  # the tool's machine name, shown as the call's `name`
    kind: ToolKind = "other"
    raw_input: Any = Field(default=None, alias="input")
    ask: bool = False
    read_file: str | None = None
    write_file: WriteFile | None = None
    run: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    result: str | None = None

    @model_validator(mode="after")
    def _one_operation(self) -> ToolStep:
        given = [n for n in ("read_file", "write_file", "run") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"a tool does one operation at most, got {' and '.join(given)}")
        if self.timeout is not None and self.run is None:
            raise ValueError("timeout is for a tool that runs a command (run)")
        return self


class SleepStep(_Model):
    sleep: float = Field(ge=0)


class ErrorStep(_Model):
    error: str


class Usage(_Model):
    input_tokens: int = Field(default=0, alias="inputTokens", ge=0)
    output_tokens: int = Field(default=0, alias="outputTokens", ge=0)
    cost_usd: float | None = Field(default=None, alias="costUsd", ge=0)


class UsageStep(_Model):
    usage: Usage


class TitleStep(_Model):
    title: str


class StdoutStep(_Model):
    stdout: str


class AskUserStep(_Model):
    ask_user: str
    choices: list[str] = Field(default_factory=list)


class StopStep(_Model):
    # "cancelled" is left out: only the server decides that a turn was cancelled.
    stop: Literal["end_turn", "max_tokens", "max_turn_requests", "refusal"]


_STEP_TYPES: dict[str, type[_Model]] = {
    "say": SayStep,
    "think": ThinkStep,
    "plan": PlanStep,
    "tool": ToolStep,
    "sleep": SleepStep,
    "error": ErrorStep,
    "usage": UsageStep,
    "title": TitleStep,
    "stdout": StdoutStep,
    "ask_user": AskUserStep,
    "stop": StopStep,
}
ACTIONS = tuple(_STEP_TYPES)  # the keys that say what a step does, in documentation order


def _step_action(value: Any) -> str | None:
    """The union tag of a step: its single action key, so errors concern that step type only."""
    if isinstance(value, dict):
        found = [key for key in ACTIONS if key in value]
        return found[0] if len(found) == 1 else None
    return next((tag for tag, cls in _STEP_TYPES.items() if isinstance(value, cls)), None)


Step = Annotated[
    Annotated[SayStep, Tag("say")]
    | Annotated[ThinkStep, Tag("think")]
    | Annotated[PlanStep, Tag("plan")]
    | Annotated[ToolStep, Tag("tool")]
    | Annotated[SleepStep, Tag("sleep")]
    | Annotated[ErrorStep, Tag("error")]
    | Annotated[UsageStep, Tag("usage")]
    | Annotated[TitleStep, Tag("title")]
    | Annotated[StdoutStep, Tag("stdout")]
    | Annotated[AskUserStep, Tag("ask_user")]
    | Annotated[StopStep, Tag("stop")],
    Discriminator(
        _step_action,
        custom_error_type="step_action",
        custom_error_message="a step needs exactly one action key",
    ),
]


class Scenario(_Model):
    match: str
    steps: list[Step]


class Script(_Model):
    scenarios: list[Scenario] = Field(default_factory=list[Scenario])
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, alias="contextWindow", ge=1)

    def find(self, text: str) -> Scenario | None:
        return next((s for s in self.scenarios if s.match in text), None)


# --- loading and error messages ---------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read and validate a scenario file; any problem is a `ScriptError` naming the file."""
    source = os.fspath(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{source}: cannot read scenario file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{source}: scenario file is not UTF-8 text: {exc.reason}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise ScriptError(f"{source}: not valid JSON: {exc.msg} at {where}") from None
    return parse_script(data, source)


def parse_script(data: Any, source: str = "<inline>") -> Script:
    """Validate already-parsed JSON; the error lists every problem, one per line."""
    if not isinstance(data, dict):
        raise ScriptError(f'{source}: the top level must be an object with a "scenarios" list')
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        # The pydantic chain adds nothing a user can act on; the message has it all.
        problems = "\n".join(f"{source}: {_describe(err)}" for err in exc.errors())
        raise ScriptError(problems) from None


def _describe(error: ErrorDetails) -> str:
    loc = _without_tags(error["loc"])
    if error["type"] == "extra_forbidden":
        return f"{_path(loc[:-1])}: unknown key {loc[-1]!r}"
    if error["type"] == "step_action":
        return f"{_path(loc)}: {_action_problem(error['input'])}"
    if error["type"] == "value_error":
        return f"{_path(loc)}: {error.get('ctx', {}).get('error', error['msg'])}"
    return f"{_path(loc)}: {error['msg']}"


def _without_tags(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    # pydantic puts the union tag after a step's index ("steps", 2, "say", "repeat").
    return tuple(
        item for i, item in enumerate(loc) if not (i >= 2 and loc[i - 2] == "steps" and isinstance(loc[i - 1], int))
    )


def _path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(f".{item}" if parts else item)
    return "".join(parts) or "top level"


def _action_problem(value: object) -> str:
    if not isinstance(value, dict):
        return "a step must be an object"
    step = cast("dict[str, object]", value)  # parsed from JSON, so its keys are str
    found = [key for key in ACTIONS if key in step]
    if found:
        return f"a step does one thing, got {' and '.join(found)}"
    keys = ", ".join(repr(key) for key in step) or "none"
    return f"no action key (keys: {keys}); a step needs one of {', '.join(ACTIONS)}"


# --- playing a scenario -----------------------------------------------------------------


class ScriptedAdapter:
    """Plays scenarios through the sink; holds no per-turn state, so sessions can share it."""

    name = "scripted"

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._script = Script() if path is None else load_script(path)
        self._echo = EchoAdapter()

    @classmethod
    def from_data(cls, data: dict[str, Any], source: str = "<inline>") -> ScriptedAdapter:
        adapter = cls(None)
        adapter._script = parse_script(data, source)
        return adapter

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(context_window=self._script.context_window)

    def health(self) -> Health:
        # The file was read and validated when the adapter was made; nothing can have broken since.
        count = len(self._script.scenarios)
        if count == 0:
            return Health(True, "no scenarios (give --script FILE): it echoes every prompt")
        return Health(True, f"{count} scenario{'s' * (count != 1)} loaded")

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        scenario = self._script.find(turn.text)
        if scenario is None:
            return self._echo.run_turn(turn, sink)
        for step in scenario.steps:
            sink.check_cancelled()
            stop = self._play(step, turn, sink)
            if stop is not None:
                return stop
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        # The sink raises TurnCancelled at the next step; there is nothing else to stop.
        return None

    def _play(self, step: Step, turn: TurnInput, sink: Sink) -> StopReason | None:
        match step:
            case SayStep(say=text, repeat=times):
                for _ in range(times):
                    sink.text(text)
            case ThinkStep(think=text):
                sink.thought(text)
            case PlanStep(plan=items):
                sink.plan([PlanEntry(i.content, i.status, i.priority) for i in items])
            case ToolStep():
                _play_tool(step, turn, sink)
            case SleepStep(sleep=seconds):
                sink.sleep(seconds)
            case ErrorStep(error=message):
                raise AgentError(message)
            case UsageStep(usage=usage):
                _report_usage(usage, self._script.context_window, sink)
            case TitleStep(title=title):
                sink.title(title)
            case StdoutStep(stdout=text):
                # Deliberately bypasses the sink: proves the server keeps the wire clean.
                sys.stdout.write(text)
                sys.stdout.flush()
            case AskUserStep(ask_user=question, choices=choices):
                try:
                    sink.text(f"{question} → {sink.clarify(question, choices=choices)}\n")
                except ToolRefused as exc:
                    sink.text(f"{question} → (no answer: {exc})\n")
            case StopStep(stop=reason):
                return reason
        return None


def _report_usage(usage: Usage, context_window: int, sink: Sink) -> None:
    sink.usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        context_used=usage.input_tokens + usage.output_tokens,
        context_size=context_window,
    )


@frozen
class _Outcome:
    content: tuple[ToolContent, ...] = ()
    status: ToolStatus = "completed"
    raw_output: Any = None


def _play_tool(step: ToolStep, turn: TurnInput, sink: Sink) -> None:
    try:
        file = _file(step, turn)
    except ToolRefused as exc:  # outside the workspace: nothing to show, ask or do
        tool_call_id = sink.tool_call(step.tool, kind=step.kind, name=step.name, raw_input=step.raw_input)
        sink.tool_update(tool_call_id, status="failed", content=[TextContent(str(exc))])
        return
    locations = () if file is None else (file.path,)
    tool_call_id = sink.tool_call(
        step.tool, kind=step.kind, name=step.name, raw_input=step.raw_input, locations=locations
    )
    # The diff goes out before the question, so the user approves a change they have seen.
    preview = _preview(step, file, sink)
    if preview:
        sink.tool_update(tool_call_id, content=preview)
    if step.ask:
        decision = sink.request_permission(tool_call_id)
        if not decision.allowed:
            reason = decision.reason or "Permission denied by the user"
            # Only the reason stays: a diff on a failed call would read as a change that was made.
            sink.tool_update(tool_call_id, status="failed", content=[TextContent(reason)])
            return
    sink.tool_update(tool_call_id, status="in_progress")
    try:
        outcome = _operate(step, file, sink, tool_call_id, preview)
    except ToolRefused as exc:
        sink.tool_update(tool_call_id, status="failed", content=[TextContent(str(exc))])
        return
    content = list(outcome.content)
    if step.result is not None:
        content.append(TextContent(step.result))
    sink.tool_update(
        tool_call_id,
        status=outcome.status,
        content=content or None,
        raw_output=outcome.raw_output,
    )


def _preview(step: ToolStep, file: Target | None, sink: Sink) -> tuple[ToolContent, ...]:
    """The diff a `write_file` will make, old text read as the write will find it: from the
    editor's buffer when it serves `fs`, else from disk; `None` when it cannot be read (a new file)."""
    if step.write_file is None or file is None:
        return ()
    try:
        old_text: str | None = sink.read_text_file(file.path)
    except ToolRefused:
        old_text = None
    return (DiffContent(path=file.path, new_text=step.write_file.content, old_text=old_text),)


def _file(step: ToolStep, turn: TurnInput) -> Target | None:
    """Where the file a read or write touches really is: the one path its locations and diff
    name (absolute, so an editor can follow along) and the sink is asked for."""
    path = step.read_file if step.write_file is None else step.write_file.path
    roots = (turn.cwd, *turn.additional_directories)
    return None if path is None else target(path, cwd=turn.cwd, roots=roots)


def _operate(
    step: ToolStep, file: Target | None, sink: Sink, tool_call_id: str, preview: tuple[ToolContent, ...]
) -> _Outcome:
    if step.read_file is not None and file is not None:
        return _Outcome((TextContent(sink.read_text_file(file.path)),))
    if step.write_file is not None and file is not None:
        sink.write_text_file(file.path, step.write_file.content)
        return _Outcome(preview)  # the diff the user approved: its old text was read once, for it
    if step.run is not None:
        timeout = step.timeout if step.timeout is not None else COMMAND_TIMEOUT
        result = sink.run_command(step.run, tool_call_id=tool_call_id, timeout=timeout)
        terminal = (TerminalContent(result.terminal_id),) if result.terminal_id else ()
        return _Outcome(
            (*terminal, TextContent(result.output)),
            "completed" if result.exit_code == 0 else "failed",
            {"exitCode": result.exit_code},
        )
    return _Outcome()
