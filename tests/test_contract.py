"""Every built-in adapter, the python callable adapter and the example agent pass the contract."""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_contract import SCENARIOS as CONTRACT_SCENARIOS
from scripted_contract import ScriptedPrompts

from adapters.base import AdapterCapabilities, ConfigChoice, ConfigOption, Health, SlashCommand, TurnCancelled
from adapters.callable import CallableAdapter, SessionInfo, SimpleAdapter
from adapters.contract import AdapterContract, check_capabilities, check_usage
from adapters.echo import EchoAdapter
from adapters.events import TextContent, UsageReported
from adapters.scripted import ScriptedAdapter
from adapters.testing import RecordingSink, run_turn, start_turn
from examples.my_agent import make_agent

SCENARIOS = {"contextWindow": 1000, "scenarios": CONTRACT_SCENARIOS}


class TestEchoAdapter(AdapterContract):
    def make_adapter(self) -> EchoAdapter:
        return EchoAdapter()


class TestScriptedAdapter(ScriptedPrompts, AdapterContract):
    @pytest.fixture(autouse=True)
    def _scenario_file(self, tmp_path: Path) -> None:
        self.path = tmp_path / "contract.json"
        self.path.write_text(json.dumps(SCENARIOS))

    def make_adapter(self) -> ScriptedAdapter:
        return ScriptedAdapter(self.path)


def run(prompt: str, session: SessionInfo) -> Iterator[str] | str:
    if prompt == "boom":
        raise RuntimeError("the callable failed")
    if prompt == "write":
        return _write(session)
    if prompt == "long":
        return _forever(session)
    return (word + " " for word in prompt.split())


def _write(session: SessionInfo) -> str:
    call = session.sink.tool_call("Write b.txt", kind="edit")
    if not session.sink.request_permission(call).allowed:
        session.sink.tool_update(call, status="failed", content=[TextContent("not allowed")])
        return "fine, I won't"
    session.sink.write_text_file("b.txt", "B")
    session.sink.tool_update(call, status="completed")
    return "written"


def _forever(session: SessionInfo) -> Iterator[str]:
    while True:
        yield "tick "
        session.sink.sleep(0.05)  # slow on purpose; the sink's sleep ends early at a cancel


class TestCallableAdapter(AdapterContract):
    def make_adapter(self) -> CallableAdapter:
        return CallableAdapter(run)

    def prompt_that_streams(self) -> str:
        return "many small words"

    def prompt_that_asks_permission(self) -> str:
        return "write"

    def prompt_that_raises(self) -> str:
        return "boom"

    def prompt_that_runs_long(self) -> str:
        return "long"


class TestExampleAgent(AdapterContract):
    def make_adapter(self) -> SimpleAdapter:
        return make_agent()

    def prompt_that_asks_permission(self) -> str:
        return "save this"


# --- the suite itself catches broken adapters --------------------------------------------------


def test_a_config_option_whose_default_is_not_a_choice_breaks_the_contract():
    option = ConfigOption("model", "Model", (ConfigChoice("a", "A"),), default="b")
    with pytest.raises(AssertionError, match="default 'b' not in"):
        check_capabilities(AdapterCapabilities(config_options=(option,)))


def test_a_command_name_with_a_space_or_slash_breaks_the_contract():
    for name in ("do it", "/go"):
        with pytest.raises(AssertionError, match="bad command name"):
            check_capabilities(AdapterCapabilities(commands=(SlashCommand(name, "x"),)))


def test_a_context_window_must_be_positive_or_unknown():
    check_capabilities(AdapterCapabilities(context_window=None))
    with pytest.raises(AssertionError, match="context_window"):
        check_capabilities(AdapterCapabilities(context_window=0))


def test_an_invented_or_impossible_cost_breaks_the_contract():
    check_usage(UsageReported(1, 2, cost_usd=None))
    check_usage(UsageReported(1, 2, cost_usd=0.25))
    for cost in (math.nan, -1.0, math.inf):
        with pytest.raises(AssertionError, match="cost_usd"):
            check_usage(UsageReported(1, 2, cost_usd=cost))


class _ReportsAfterItEnds(SimpleAdapter):
    def run_turn(self, turn, sink):
        self.sink = sink
        return "end_turn"


def test_a_sink_call_after_the_turn_ended_is_recorded_and_raises():
    adapter = _ReportsAfterItEnds()
    record = run_turn(adapter, "hi")
    assert record.reason == "end_turn"
    with pytest.raises(Exception, match="after the turn ended"):
        adapter.sink.text("late")
    assert adapter.sink.late_calls == ("text",)


def test_a_run_turn_that_returns_no_stop_reason_is_a_failed_turn():
    class Sloppy(SimpleAdapter):
        def run_turn(self, turn, sink):
            return "done"

    record = run_turn(Sloppy(), "hi")
    assert record.reason == "failed"
    assert record.finished.message == "run_turn returned 'done', which is not a stop reason"


def test_a_cancelled_recording_sink_stops_a_sleeping_turn_from_another_thread():
    running = start_turn(CallableAdapter(run), "long")
    assert running.sink.activity.wait(5)
    running.cancel()
    record = running.wait(5)
    assert record.reason == "cancelled" and record.text.startswith("tick")


def test_a_cancel_the_moment_a_delta_sets_activity_keeps_that_delta_and_stops_the_next():
    """A test that cancels as soon as `activity` is set (the fastest it can) still finds the delta
    that set it; before, the delta was checked twice and the second check dropped it."""
    sink = RecordingSink()
    set_activity = sink.activity.set

    def set_and_cancel() -> None:
        set_activity()
        sink.cancel()

    sink.activity.set = set_and_cancel  # type: ignore[method-assign]
    sink.text("Thi")
    with pytest.raises(TurnCancelled):
        sink.text("nking")
    assert [envelope.event.text for envelope in sink.events] == ["Thi"]


def test_the_recording_sink_answers_file_reads_from_its_files_and_its_own_writes():
    sink = RecordingSink()
    sink.write_text_file("x.txt", "1\n2\n3\n")
    assert sink.read_text_file("x.txt", line=2, limit=1) == "2\n"
    assert [a.method for a in sink.asks] == ["write_text_file", "read_text_file"]
    assert [a.seq for a in sink.asks] == [1, 2]


def test_health_of_an_adapter_without_health_is_healthy():
    class Bare:
        name = "bare"

    from adapters.base import health_of

    assert health_of(Bare()) == Health(True, "no checks needed")  # type: ignore[arg-type]


def test_a_health_that_returns_no_health_is_named_where_it_is_called():
    class Vague(SimpleAdapter):
        def health(self):  # type: ignore[override]
            return "fine"

    from adapters.base import health_of

    with pytest.raises(TypeError, match=r"^Vague.health\(\) returned str, not Health$"):
        health_of(Vague())


# --- ...and fails adapters that break it ---------------------------------------------------------


class _Broken(SimpleAdapter):
    """Ignores cancellation for a while, swallows errors, runs rejected tools, reports late."""

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(cancel_latency=0.05)

    def run_turn(self, turn, sink):
        if turn.text == "long":
            sink.text("working")
            threading.Event().wait(1.0)  # not sink.sleep: deaf to the cancel
        elif turn.text == "write":
            call = sink.tool_call("Write", kind="edit")
            sink.request_permission(call)  # the answer is ignored
            sink.write_text_file("c.txt", "C")
            sink.tool_update(call, status="completed")
        elif turn.text == "late":
            threading.Thread(target=_report_later, args=(sink,)).start()
        return "end_turn"


def _report_later(sink) -> None:
    sink.ended.wait(5)  # reports once the turn is over, the defect the contract must catch
    with contextlib.suppress(TurnCancelled):
        sink.text("late")


class _BrokenContract(AdapterContract):
    def make_adapter(self) -> _Broken:
        return _Broken()

    def prompt_that_streams(self) -> str:
        return "late"

    def prompt_that_asks_permission(self) -> str:
        return "write"

    def prompt_that_raises(self) -> str:
        return "nothing raises here"

    def prompt_that_runs_long(self) -> str:
        return "long"


@pytest.mark.parametrize(
    ("check", "complaint"),
    [
        ("test_cancellation_is_honoured_within_the_stated_latency", "cancel took"),
        ("test_a_rejected_permission_means_the_tool_does_not_complete", "rejected tool went on"),
        ("test_an_exception_becomes_a_failed_run", "should raise ended end_turn"),
        ("test_a_turn_ends_in_exactly_one_stop_reason_and_reports_nothing_after_it", "after its turn ended"),
    ],
)
def test_the_contract_fails_an_adapter_that_breaks_it(check, complaint):
    with pytest.raises(AssertionError, match=complaint):
        getattr(_BrokenContract(), check)()
