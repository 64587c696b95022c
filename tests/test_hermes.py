"""Hermes' real AIAgent behind acp-server, against the fake model on 127.0.0.1 with a
throw-away HERMES_HOME: streaming, linked permissions, editor buffers, writes and terminals
through the client, cancel, restart with history, clarify, plans, and loopback-only traffic.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI, reply
from hermes_home import hermes_model
from stdio_server import StdioServer

from adapters.base import CommandResult, Message, PermissionDecision, Transcript, TurnInput
from adapters.events import (
    DiffContent,
    PlanEntry,
    PlanUpdated,
    TerminalContent,
    ThoughtDelta,
    ToolCallStarted,
    ToolCallUpdated,
    TranscriptSaved,
    UsageReported,
)
from adapters.hermes import HermesAdapter
from adapters.testing import REJECT, Answers, RecordingSink, run_turn, start_turn

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with hermes_model(tmp_path, monkeypatch) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def turn(adapter: HermesAdapter, prompt: str, workspace: Path, sink: RecordingSink | None = None, **fields: Any):
    return run_turn(adapter, prompt, sink=sink, cwd=str(workspace), session_id="s1", timeout=30, **fields)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def test_text_streams_as_deltas_and_reasoning_as_thoughts(fake, workspace):
    fake.script(reply("Hello from Hermes!", reasoning="pondering", usage={"prompt_tokens": 10, "completion_tokens": 4}))
    record = turn(HermesAdapter(), "hi", workspace)
    assert record.reason == "end_turn"
    assert record.text == "Hello from Hermes!"
    assert "".join(e.text for e in record.of_kind(ThoughtDelta)) == "pondering"
    assert len([e for e in record.events if e.event.kind == "text"]) > 1, "the answer came in one piece"


def test_usage_is_each_turns_own_share_of_hermes_cumulative_counters(fake, workspace):
    adapter = HermesAdapter()
    fake.script(reply("one", usage={"prompt_tokens": 10, "completion_tokens": 4}))
    fake.script(reply("two", usage={"prompt_tokens": 30, "completion_tokens": 6}))
    first = turn(adapter, "first", workspace).of_kind(UsageReported)
    second = turn(adapter, "second", workspace).of_kind(UsageReported)
    assert [(u.input_tokens, u.output_tokens, u.context_size) for u in first] == [(10, 4, 128000)]
    assert [(u.input_tokens, u.output_tokens, u.context_size) for u in second] == [(30, 6, 128000)]


def test_a_write_asks_permission_about_the_visible_call_with_its_diff_and_goes_through_the_client(fake, workspace):
    target = str(workspace / "notes.txt")
    fake.script(reply(tools=[("write_file", {"path": "notes.txt", "content": "new\n"})]), reply("Written."))
    sink = RecordingSink(Answers(files={target: "old\n"}))
    record = turn(HermesAdapter(), "write notes", workspace, sink)
    assert record.reason == "end_turn"
    (started,) = record.of_kind(ToolCallStarted)
    assert (started.tool_call_id, started.tool_kind, started.title) == ("call_0_write_file", "edit", "Write notes.txt")
    asked = [a for a in record.asks if a.method == "request_permission"]
    assert [a.args for a in asked] == [("call_0_write_file",)]
    diffs = [e for e in record.events if isinstance(e.event, ToolCallUpdated) and e.event.content]
    assert diffs[0].seq < asked[0].seq, "the diff was not shown before the question"
    assert diffs[0].event.content == (DiffContent(target, "new\n", "old\n"),)
    assert sink.files[target] == "new\n"
    assert not (workspace / "notes.txt").exists(), "Hermes wrote the disk instead of the editor's buffer"


def test_a_refused_write_is_not_written_and_hermes_hears_the_refusal(fake, workspace):
    fake.script(reply(tools=[("write_file", {"path": "notes.txt", "content": "new\n"})]), reply("Understood."))
    sink = RecordingSink(REJECT)
    record = turn(HermesAdapter(), "write notes", workspace, sink)
    assert record.reason == "end_turn" and record.text == "Understood."
    assert not [a for a in record.asks if a.method == "write_text_file"]
    assert not (workspace / "notes.txt").exists()
    statuses = [e.status for e in record.of_kind(ToolCallUpdated) if e.status]
    assert statuses == ["failed"]
    assert "Rejected by the test" in tool_results(fake.chats[1])["call_0_write_file"]


def test_a_read_is_served_from_the_editors_unsaved_buffer(fake, workspace):
    (workspace / "app.py").write_text("print('on disk')\n")
    fake.script(reply(tools=[("read_file", {"path": "app.py"})]), reply("Read it."))
    sink = RecordingSink(Answers(files={str(workspace / "app.py"): "print('unsaved')\n"}))
    record = turn(HermesAdapter(), "read app.py", workspace, sink)
    assert record.reason == "end_turn"
    seen = json.loads(tool_results(fake.chats[1])["call_0_read_file"])
    assert seen["content"] == "1|print('unsaved')\n"


def test_a_command_runs_in_the_editors_terminal_linked_to_its_tool_call(fake, workspace):
    fake.script(reply(tools=[("terminal", {"command": "make test"})]), reply("Tests pass."))
    sink = RecordingSink(Answers(command=CommandResult("ok\n", 0, terminal_id="term_7")))
    record = turn(HermesAdapter(), "run the tests", workspace, sink)
    assert record.reason == "end_turn"
    (ran,) = [a for a in record.asks if a.method == "run_command"]
    assert ran.args == ("make test", "call_0_terminal", None)
    updates = record.of_kind(ToolCallUpdated)
    assert [e.content for e in updates if e.content] == [(TerminalContent("term_7"),)]  # shown once
    assert [e.status for e in updates if e.status] == ["in_progress", "completed"]
    assert json.loads(tool_results(fake.chats[1])["call_0_terminal"])["output"] == "ok\n"


@pytest.mark.parametrize("terminal_id", ["term_3", None], ids=["editor terminal", "local"])
def test_a_command_that_exits_non_zero_ends_its_tool_call_failed(fake, workspace, terminal_id):
    fake.script(reply(tools=[("terminal", {"command": "make test"})]), reply("Tests fail."))
    sink = RecordingSink(Answers(command=CommandResult("2 failed\n", 3, terminal_id=terminal_id)))
    record = turn(HermesAdapter(), "run the tests", workspace, sink)
    assert record.reason == "end_turn"
    updates = record.of_kind(ToolCallUpdated)
    assert [e.status for e in updates if e.status] == ["in_progress", "failed"]
    shown = [e.content for e in updates if e.content]
    assert len(shown) == 1, f"the same content was sent {len(shown)} times"
    assert json.loads(tool_results(fake.chats[1])["call_0_terminal"])["exit_code"] == 3


def test_cancel_mid_command_ends_the_turn_cancelled_and_the_next_turn_starts_clean(fake, workspace):
    adapter = HermesAdapter()
    started, release = threading.Event(), threading.Event()

    def slow(command: str) -> CommandResult:
        started.set()
        release.wait(20)
        return CommandResult("late\n", 0)

    fake.script(reply(tools=[("terminal", {"command": "sleep 100"})]))
    running = start_turn(
        adapter, "slow", sink=RecordingSink(Answers(command=slow)), cwd=str(workspace), session_id="s1"
    )
    assert started.wait(30)
    running.cancel()
    release.set()
    assert running.wait(30).reason == "cancelled"
    fake.script(reply("Fresh start."))
    assert turn(adapter, "again", workspace).text.endswith("Fresh start.")


def test_cancel_mid_stream_interrupts_hermes_and_the_next_turn_is_not_interrupted(fake, workspace):
    adapter = HermesAdapter()
    fake.script(reply("Thinking", hold_open=True))
    running = start_turn(adapter, "long", cwd=str(workspace), session_id="s1")
    assert running.sink.activity.wait(30)
    running.cancel()
    record = running.wait(30)
    assert record.reason == "cancelled" and record.text.startswith("Thi")
    adapter.cancel("s1")  # a late cancel, after the run ended, leaves Hermes' interrupt flag set
    fake.script(reply("Next."))
    assert turn(adapter, "again", workspace).text == "Next."


def test_a_turn_saves_the_messages_it_added_and_the_next_turn_runs_on_them(fake, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    fake.script(reply(tools=[("read_file", {"path": "a.txt"})]), reply("It says alpha."))
    sink = RecordingSink(Answers(files={str(workspace / "a.txt"): "alpha\n"}))
    first = turn(HermesAdapter(), "what is in a.txt?", workspace, sink)
    (save,) = first.of_kind(TranscriptSaved)
    assert (save.format, save.base) == ("hermes", True)
    assert [m["role"] for m in save.messages] == ["user", "assistant", "tool", "assistant"]
    assert not any(k.startswith("_") for m in save.messages for k in m), "Hermes' bookkeeping was saved"

    kept = copy.deepcopy(save.messages)
    fake.script(reply("Yes."))
    cut_off = (Message("user", "and b.txt?"), Message("agent", "b says"))  # cancelled: never saved
    second = turn(HermesAdapter(), "sure?", workspace, transcript=Transcript("hermes", save.messages, cut_off))
    messages = fake.chats[-1]["messages"]
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == ["call_0_read_file"]
    assert "alpha" in tool_results(fake.chats[-1])["call_0_read_file"]
    assert [m["content"] for m in messages if m["role"] != "system"][-3:] == ["and b.txt?", "b says", "sure?"]
    assert save.messages == kept, "Hermes changed the saved transcript it was given"
    (appended,) = second.of_kind(TranscriptSaved)
    assert not appended.base
    assert [(m["role"], m["content"]) for m in appended.messages] == [
        ("user", "and b.txt?"),
        ("assistant", "b says"),
        ("user", "sure?"),
        ("assistant", "Yes."),
    ]


def test_a_transcript_of_another_format_is_ignored_for_the_plain_history(fake, workspace):
    fake.script(reply("Yes."))
    history = (Message("user", "earlier"), Message("agent", "reply"))
    other = Transcript("openai", ({"role": "user", "content": "not for hermes"},))
    record = turn(HermesAdapter(), "now", workspace, history=history, transcript=other)
    sent = [(m["role"], m["content"]) for m in fake.chats[-1]["messages"] if m["role"] != "system"]
    assert sent == [("user", "earlier"), ("assistant", "reply"), ("user", "now")]
    assert [s.base for s in record.of_kind(TranscriptSaved)] == [True]


def test_hermes_writes_nothing_of_our_sessions_into_its_own_state_db(fake, workspace):
    fake.script(reply("one"))
    turn(HermesAdapter(), "first", workspace)
    state = Path(os.environ["HERMES_HOME"]) / "state.db"
    if state.exists():
        with sqlite3.connect(state) as db:
            assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_a_server_killed_after_a_tool_call_continues_the_conversation_from_its_journal(fake, workspace, tmp_path):
    (workspace / "a.txt").write_text("alpha\n")
    fake.script(reply(tools=[("read_file", {"path": "a.txt"})]), reply("It says alpha."), reply("Yes."))
    db = str(tmp_path / "journal.db")
    server = StdioServer("--agent", "hermes", "--db", db)
    try:
        sid = server.start_session(str(workspace))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "what is in a.txt?"}]}
        assert (
            server.response(server.request("session/prompt", prompt), timeout=90)["result"]["stopReason"] == "end_turn"
        )
    finally:
        server.kill()  # SIGKILL: nothing is flushed on the way out
    (workspace / "a.txt").write_text("changed on disk\n")  # what Hermes knows comes from the journal,
    (Path(os.environ["HERMES_HOME"]) / "state.db").unlink(missing_ok=True)  # not from Hermes' own store
    server = StdioServer("--agent", "hermes", "--db", db)
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        server.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "sure?"}]}
        assert (
            server.response(server.request("session/prompt", prompt), timeout=90)["result"]["stopReason"] == "end_turn"
        )
    finally:
        server.kill()
    messages = fake.chats[-1]["messages"]
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == ["call_0_read_file"]
    assert "alpha" in tool_results(fake.chats[-1])["call_0_read_file"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["what is in a.txt?", "sure?"]


def test_clarify_asks_through_our_clarify_path(fake, workspace):
    fake.script(reply(tools=[("clarify", {"question": "Which target?", "choices": ["staging", "prod"]})]), reply("Ok."))
    sink = RecordingSink(Answers(clarify="staging"))
    record = turn(HermesAdapter(), "deploy", workspace, sink)
    assert record.reason == "end_turn"
    (asked,) = [a for a in record.asks if a.method == "clarify"]
    assert asked.args == ("Which target?", ("staging", "prod"), "call_0_clarify")
    assert json.loads(tool_results(fake.chats[1])["call_0_clarify"])["user_response"] == "staging"


def test_the_todo_tool_becomes_the_plan(fake, workspace):
    todos = [
        {"id": "1", "content": "Read", "status": "completed"},
        {"id": "2", "content": "Fix", "status": "in_progress"},
    ]
    fake.script(reply(tools=[("todo", {"todos": todos})]), reply("Planned."))
    record = turn(HermesAdapter(), "plan it", workspace)
    assert [p.entries for p in record.of_kind(PlanUpdated)] == [
        (PlanEntry("Read", "completed"), PlanEntry("Fix", "in_progress"))
    ]


def test_a_policy_refusal_of_a_command_means_hermes_own_gate_never_runs_it(fake, workspace):
    marker = workspace / "ran"
    fake.script(reply(tools=[("terminal", {"command": f"touch {marker}"})]), reply("Not run."))
    sink = RecordingSink(Answers(permission=PermissionDecision(False, reason="policy says no")))
    record = turn(HermesAdapter(), "touch", workspace, sink)
    assert record.reason == "end_turn" and not marker.exists()
    assert not [a for a in record.asks if a.method == "run_command"]


def test_all_traffic_stays_on_loopback(fake, workspace):
    script = f"""
import sys, os
hosts = set()
def audit(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple):
        hosts.add(str(args[1][0]))
sys.addaudithook(audit)
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
from adapters.hermes import HermesAdapter
from adapters.testing import run_turn
record = run_turn(HermesAdapter(), "hi", cwd={str(workspace)!r}, session_id="s1", timeout=30)
print(record.reason, sorted(hosts))
"""
    fake.responder = lambda body: reply("Hi.")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "end_turn ['127.0.0.1']", done.stderr[-2000:]


@pytest.mark.parametrize("where", ["the clone", "elsewhere"])
def test_without_the_extra_the_server_fails_at_start_with_one_line_saying_what_to_install(tmp_path, where):
    """A clone (this checkout) is told `pip install -e '.[hermes]'`, spelled with its directory
    when the command runs somewhere else; the PyPI form would be wrong for it."""
    script = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.modules['run_agent'] = None; "
        "from acp_server.cli.main import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "--agent", "hermes"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT if where == "the clone" else tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == ""
    message = done.stderr.strip().splitlines()[-1]
    install = "pip install -e '.[hermes]'" if where == "the clone" else f"pip install -e '{ROOT}[hermes]'"
    assert "hermes-agent" in message and message.endswith(f"({install}) (see acp-server --help)"), done.stderr


def test_open_session_builds_the_agent_once_and_the_first_prompt_uses_it(fake, workspace, monkeypatch):
    adapter = HermesAdapter(warm=False)
    builds: list[str] = []
    build = adapter._build

    def counting(turn_input):
        builds.append(turn_input.session_id)
        return build(turn_input)

    monkeypatch.setattr(adapter, "_build", counting)
    fake.script(reply("ready"))
    ready = TurnInput("s1", str(workspace), ())
    opener = threading.Thread(target=adapter.open_session, args=(ready,))
    opener.start()  # the prompt may arrive while the session is still being prepared
    record = turn(adapter, "hi", workspace)
    opener.join(30)
    assert record.text == "ready"
    assert builds == ["s1"]


def test_the_warm_up_computes_the_tool_definitions_a_sessions_build_then_reuses(fake, workspace):
    from adapters.hermes import agent as hermes_agent

    model_tools = hermes_agent.hermes("model_tools")
    model_tools._clear_tool_defs_cache()
    hermes_agent._warm_up()
    warmed = [defs[0] for defs in model_tools._tool_defs_cache.values()]
    adapter = HermesAdapter(warm=False)
    adapter.open_session(TurnInput("s1", str(workspace), ()))
    built = adapter._sessions["s1"].agent.tools
    assert any(built[0] is first for first in warmed), "the session's build computed its tool definitions again"


WARM_UP_WAITS = """
import sys, threading, time
from adapters.base import TurnInput
from adapters.hermes import agent
agent.WARM_DELAY = 600.0
adapter = agent.HermesAdapter()
time.sleep(0.5)
assert "run_agent" not in sys.modules, "the warm-up started before any session"
warm = next(t for t in threading.enumerate() if t.name == "hermes-import")  # waiting, before it may end
adapter.open_session(TurnInput("s1", sys.argv[1], ()))
warm.join(60)
assert not warm.is_alive() and "openai.resources" in sys.modules, "no warm-up once a session opened"
"""


def run_python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter: what a process does at its start and exit."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def test_the_warm_up_waits_for_the_first_session_and_then_runs(fake, workspace):
    done = run_python(WARM_UP_WAITS, str(workspace))
    assert done.returncode == 0, done.stderr


EXIT_DURING_WARM_UP = """
import atexit, sys, threading
from adapters.hermes import agent
found = []
atexit.register(lambda: print("alive" if found[0].is_alive() else "done", flush=True))  # runs after the adapter's
adapter = agent.HermesAdapter()
found.append(next(t for t in threading.enumerate() if t.name == "hermes-import"))
adapter._asked.set()  # the editor opened a session: the warm-up begins, and the process exits at once
"""


def test_the_process_exits_after_the_warm_up_under_way_stops_not_in_the_middle_of_it(fake, workspace):
    """Left to the interpreter's exit, the daemon thread was stopped wherever it was; inside
    pydantic-core's Rust code that aborted the process ("FATAL: exception not rethrown")."""
    done = run_python(EXIT_DURING_WARM_UP)
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert "FATAL" not in done.stderr


def test_the_vivid_contract_reaches_hermes_requests_only_in_vivid_turns(fake, workspace):
    from adapters.haui_contract import HAUI_CONTRACT

    adapter = HermesAdapter(warm=False)
    assert [o.id for o in adapter.capabilities().config_options] == ["response_style"]
    fake.script(reply("drawn"), reply("plain"))
    turn(adapter, "show me", workspace, config={"response_style": "vivid"})
    turn(adapter, "again", workspace, config={"response_style": "plain"})
    vivid, plain = ("\n".join(m["content"] for m in body["messages"] if m["role"] == "system") for body in fake.chats)
    assert HAUI_CONTRACT.strip() in vivid
    assert HAUI_CONTRACT.strip()[:40] not in plain


def test_file_tools_name_their_absolute_paths_in_locations_and_a_reads_first_line(fake, workspace):
    from acp_server.turns.mapping import to_update

    app, notes = str(workspace / "app.py"), str(workspace / "notes.txt")
    tools = [
        ("read_file", {"path": "app.py", "offset": 2}),
        ("patch", {"mode": "replace", "path": "./app.py", "old_string": "b", "new_string": "B"}),
        ("write_file", {"path": "notes.txt", "content": "new\n"}),
    ]
    fake.script(reply(tools=tools), reply("Done."))
    record = turn(HermesAdapter(), "edit", workspace, RecordingSink(Answers(files={app: "a\nb\n"})))
    assert record.reason == "end_turn"
    frames = [to_update(started) for started in record.of_kind(ToolCallStarted)]
    assert {f["title"]: f.get("locations") for f in frames if f is not None} == {
        "Read app.py": [{"path": app, "line": 2}],
        "Edit app.py": [{"path": app}],  # named where it is
        "Write notes.txt": [{"path": notes}],
    }
