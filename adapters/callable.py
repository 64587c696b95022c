"""The two shortest ways to write an agent: a class deriving `SimpleAdapter` that defines only
`run_turn`, or a plain function `run(prompt, session) -> str | Iterator[str]` that
`CallableAdapter` (the `python` agent) wraps. Both talk only to the turn's sink.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

from adapters.base import AdapterCapabilities, Health, Message, Sink, TurnInput
from adapters.events import StopReason
from adapters.frozen import frozen

RunFunction = Callable[[str, "SessionInfo"], Any]


class SimpleAdapter:
    """Defaults for everything but `run_turn`: no extra capabilities, nothing to cancel
    (the sink raises `TurnCancelled` at the next call), always healthy."""

    name = "custom"

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        raise NotImplementedError(f"{type(self).__name__} must define run_turn(turn, sink)")

    def cancel(self, session_id: str) -> None:
        return None

    def health(self) -> Health:
        return Health(True, "no checks needed")


@frozen
class SessionInfo:
    """What a plain `run` function gets besides the prompt text; `sink` is there for asking
    permission, reading files and the like, `turn` for everything else (prompt blocks, MCP)."""

    session_id: str
    cwd: str
    history: tuple[Message, ...]
    mode: str | None
    config: Mapping[str, Any]
    sink: Sink
    turn: TurnInput


class CallableAdapter(SimpleAdapter):
    """Wraps `run(prompt, session)`: a returned str is one text delta, an iterator streams
    each item as a delta (the turn stops between items once cancelled), None says nothing."""

    name = "python"

    def __init__(self, run: RunFunction, *, source: str | None = None) -> None:
        if not callable(run):
            raise TypeError(f"{run!r} is not callable; the python agent needs def run(prompt, session)")
        self._run = run
        self._source = source or _describe(run)

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(streaming=inspect.isgeneratorfunction(self._run))

    def health(self) -> Health:
        return Health(True, f"calls {self._source}")

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        session = SessionInfo(turn.session_id, turn.cwd, turn.history, turn.mode, turn.config, sink, turn)
        reply = self._run(turn.text, session)
        if reply is None:
            return "end_turn"
        if isinstance(reply, str):
            sink.text(reply)
            return "end_turn"
        if not isinstance(reply, Iterable):
            raise TypeError(f"{self._source} returned {type(reply).__name__}; expected str, an iterator of str or None")
        _stream(iter(cast("Iterable[object]", reply)), sink, self._source)
        return "end_turn"


def _stream(chunks: Iterator[object], sink: Sink, source: str) -> None:
    try:
        for chunk in chunks:
            if not isinstance(chunk, str):
                raise TypeError(f"{source} yielded {type(chunk).__name__}; every item must be a str")
            sink.check_cancelled()
            sink.text(chunk)
    finally:
        # Runs the generator's own `finally` blocks now, not whenever it is collected.
        close = getattr(chunks, "close", None)
        if callable(close):
            close()


def _describe(run: Callable[..., Any]) -> str:
    module = getattr(run, "__module__", None) or "?"
    return f"{module}:{getattr(run, '__qualname__', type(run).__name__)}"
