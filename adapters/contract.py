"""The contract every adapter passes, as a pytest base class third-party packages reuse:
subclass `AdapterContract` in a class named `Test...` and define `make_adapter(self)`; the
`prompt_that_*` hooks enable checks that need a particular prompt (None skips them, visibly).
Turns run through `adapters.testing`, without the server. Loaded as a plugin
(`pytest -p adapters.contract`), it also provides a `recording_sink` fixture.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from adapters.base import AdapterCapabilities, Health, RuntimeAdapter, TurnCancelled, health_of
from adapters.events import STOP_REASONS, ToolCallUpdated, UsageReported
from adapters.testing import REJECT, RecordingSink, RunningTurn, TurnRecord, start_turn

HEALTH_BUDGET = 2.0
SIDE_EFFECTS = ("write_text_file", "run_command")
FLAGS = ("streaming", "image", "audio", "embedded_context", "mcp_http", "mcp_sse")


@pytest.fixture
def recording_sink() -> Iterator[RecordingSink]:
    """A fresh RecordingSink, closed after the test (late calls then raise)."""
    sink = RecordingSink()
    yield sink
    sink.close()


class AdapterContract:
    """Subclass with `make_adapter`; override the `prompt_that_*` hooks to enable checks:

    from adapters.contract import AdapterContract

    class TestMyAgent(AdapterContract):
        def make_adapter(self):
            return MyAgent()

        def prompt_that_asks_permission(self):
            return "create hello.txt"
    """

    turn_timeout: ClassVar[float] = 10.0  # a turn taking longer counts as hung
    cancel_slack: ClassVar[float] = 0.5  # added to the stated cancel latency, for slow machines
    settle: ClassVar[float] = 0.1  # how long to watch for reports after a turn has ended

    # --- hooks -----------------------------------------------------------------------------

    def make_adapter(self) -> RuntimeAdapter:
        raise NotImplementedError("define make_adapter(self) in your AdapterContract subclass")

    def prompt_that_streams(self) -> str | None:
        """A prompt answered with text (the basic turn)."""
        return "hello"

    def prompt_that_asks_permission(self) -> str | None:
        """A prompt that starts a tool call and asks permission before running it."""
        return None

    def prompt_that_raises(self) -> str | None:
        """A prompt on which run_turn raises (an AgentError or any other exception)."""
        return None

    def prompt_that_runs_long(self) -> str | None:
        """A prompt whose turn runs far longer than the cancel latency unless cancelled."""
        return None

    def turn_fields(self) -> dict[str, Any]:
        """Extra TurnInput fields (cwd, config, mode, history) for every turn."""
        return {}

    # --- helpers ---------------------------------------------------------------------------

    def _prompt(self, hook: str) -> str:
        prompt: str | None = getattr(self, hook)()
        if prompt is None:
            pytest.skip(f"{type(self).__name__}.{hook}() returns None: this check does not apply")
        return prompt

    def _start(self, adapter: RuntimeAdapter, prompt: str, sink: RecordingSink | None = None) -> RunningTurn:
        return start_turn(adapter, prompt, sink=sink, **self.turn_fields())

    def _run(self, prompt: str, sink: RecordingSink | None = None) -> TurnRecord:
        running = self._start(self.make_adapter(), prompt, sink)
        record = running.wait(self.turn_timeout)
        _check_record(record, running.sink, self.settle)
        return record

    # --- the contract ----------------------------------------------------------------------

    def test_the_adapter_has_a_name(self) -> None:
        name = self.make_adapter().name
        assert isinstance(name, str) and name.strip(), f"adapter.name must be a non-empty str, got {name!r}"

    def test_capabilities_are_well_formed(self) -> None:
        check_capabilities(self.make_adapter().capabilities())

    def test_health_answers_within_two_seconds(self) -> None:
        adapter = self.make_adapter()
        health = call_within(lambda: health_of(adapter), HEALTH_BUDGET, what="health()")
        assert isinstance(health, Health), f"health() returned {type(health).__name__}, not Health"
        assert isinstance(health.ok, bool) and isinstance(health.detail, str) and health.detail
        for key, value in health.settings.items():
            assert isinstance(key, str) and isinstance(value, tuple) and len(value) == 2, (key, value)
            assert all(isinstance(part, str) for part in value), f"setting {key}: (value, source) are str"

    def test_a_turn_ends_in_exactly_one_stop_reason_and_reports_nothing_after_it(self) -> None:
        record = self._run(self._prompt("prompt_that_streams"))
        assert record.error is None, f"the turn failed: {record.finished.message}"
        assert record.reason in STOP_REASONS - {"cancelled"}, record.finished.message

    def test_a_turn_streams_text_with_strictly_increasing_seq(self) -> None:
        record = self._run(self._prompt("prompt_that_streams"))
        assert record.text, "the turn reported no text"
        seqs = [e.seq for e in record.events]
        assert all(a < b for a, b in itertools.pairwise(seqs)), f"seq not strictly increasing: {seqs}"

    def test_usage_cost_is_a_number_or_explicitly_unknown(self) -> None:
        for hook in ("prompt_that_streams", "prompt_that_asks_permission"):
            prompt = getattr(self, hook)()
            if prompt is not None:
                for usage in self._run(prompt).of_kind(UsageReported):
                    check_usage(usage)

    def test_cancellation_is_honoured_within_the_stated_latency(self) -> None:
        prompt = self._prompt("prompt_that_runs_long")
        adapter = self.make_adapter()
        latency = adapter.capabilities().cancel_latency
        running = self._start(adapter, prompt)
        running.sink.activity.wait(self.turn_timeout)
        assert not running.done, "the long-running turn ended before it could be cancelled"
        running.cancel()
        record = running.wait(latency + self.cancel_slack + self.turn_timeout)
        assert record.reason == "cancelled", f"a cancelled turn ended {record.reason}: {record.finished.message}"
        assert record.cancel_latency is not None
        assert record.cancel_latency <= latency + self.cancel_slack, (
            f"cancel took {record.cancel_latency:.2f} s; capabilities().cancel_latency says {latency:g} s"
        )
        _check_record(record, running.sink, self.settle)

    def test_a_rejected_permission_means_the_tool_does_not_complete(self) -> None:
        record = self._run(self._prompt("prompt_that_asks_permission"), RecordingSink(REJECT))
        assert record.reason in STOP_REASONS - {"cancelled"}, f"a rejection ended the turn {record.reason}"
        rejected = {a.args[0]: a.seq for a in record.asks if a.method == "request_permission"}
        assert rejected, "the turn asked no permission"
        for envelope in record.events:
            event = envelope.event
            if isinstance(event, ToolCallUpdated) and envelope.seq > rejected.get(event.tool_call_id, math.inf):
                assert event.status not in ("in_progress", "completed"), f"rejected tool went on: {event}"
        if len(rejected) == 1:
            (asked_at,) = rejected.values()
            ran = [a.method for a in record.asks if a.method in SIDE_EFFECTS and a.seq > asked_at]
            assert not ran, f"the rejected tool still ran: {ran}"

    def test_an_allowed_permission_lets_the_tool_complete(self) -> None:
        record = self._run(self._prompt("prompt_that_asks_permission"))
        assert record.reason in STOP_REASONS - {"cancelled"}, record.finished.message
        allowed = {a.args[0] for a in record.asks if a.method == "request_permission"}
        assert allowed, "the turn asked no permission"
        statuses = {e.tool_call_id: e.status for e in record.of_kind(ToolCallUpdated) if e.status}
        assert all(statuses.get(tool) == "completed" for tool in allowed), f"tool statuses: {statuses}"

    def test_an_exception_becomes_a_failed_run(self) -> None:
        record = self._run(self._prompt("prompt_that_raises"))
        assert record.reason == "failed", f"a turn that should raise ended {record.reason}"
        assert record.error is not None and not isinstance(record.error, TurnCancelled), record.finished.message


# --- checks usable on their own ---------------------------------------------------------------


def check_capabilities(caps: AdapterCapabilities) -> None:
    assert isinstance(caps, AdapterCapabilities), f"capabilities() returned {type(caps).__name__}"
    for flag in FLAGS:
        assert isinstance(getattr(caps, flag), bool), f"{flag} must be a bool"
    window = caps.context_window
    assert window is None or (isinstance(window, int) and not isinstance(window, bool) and window > 0), (
        f"context_window must be a positive int or None, got {window!r}"
    )
    assert _positive(caps.cancel_latency), f"cancel_latency must be a positive number, got {caps.cancel_latency!r}"
    ids = [option.id for option in caps.config_options]
    assert len(set(ids)) == len(ids), f"config option ids repeat: {ids}"
    for option in caps.config_options:
        values = [choice.value for choice in option.choices]
        assert option.id and option.name and values, f"config option {option.id!r} needs a name and choices"
        assert len(set(values)) == len(values), f"config option {option.id!r} repeats a choice: {values}"
        assert option.default in values, f"config option {option.id!r}: default {option.default!r} not in {values}"
    names = [command.name for command in caps.commands]
    assert len(set(names)) == len(names), f"command names repeat: {names}"
    for command in caps.commands:
        name = command.name
        assert name and not any(c.isspace() or c == "/" for c in name), f"bad command name {name!r}"
        assert isinstance(command.description, str), f"command {name!r} needs a description"


def check_usage(usage: UsageReported) -> None:
    """Tokens are counts; cost is a real, non-negative number or None (unknown), never made up."""
    for name in ("input_tokens", "output_tokens"):
        value = getattr(usage, name)
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 0, f"{name}={value!r}"
    cost = usage.cost_usd
    assert cost is None or (_number(cost) and math.isfinite(cost) and cost >= 0), (
        f"cost_usd must be a finite non-negative number or None when unknown, got {cost!r}"
    )


def call_within(call: Any, seconds: float, *, what: str) -> Any:
    """The result of `call()` run in a daemon thread; fails the test when it takes too long."""
    outcome: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # re-raised in the test's thread
            outcome.append((False, exc))
        done.set()

    threading.Thread(target=work, name=what, daemon=True).start()
    if not done.wait(seconds):
        pytest.fail(f"{what} did not answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _check_record(record: TurnRecord, sink: RecordingSink, settle: float) -> None:
    for usage in record.of_kind(UsageReported):
        check_usage(usage)
    sink.late_call.wait(settle)
    assert not sink.late_calls, f"the adapter used the sink after its turn ended: {sink.late_calls}"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive(value: Any) -> bool:
    return _number(value) and math.isfinite(value) and value > 0
