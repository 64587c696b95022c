"""Sessions with an agent below survive restarts: a fresh acp-server (and a fresh agent) on
the same journal loads the session with our replay before the answer, brings the agent's
session back under the agent's own id (its replay is not shown again), and the next prompt
reaches an agent that remembers; an agent that cannot load gets a new session, and the editor
is told that the agent lost its memory of the earlier turns."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from acp_child import Runtimes, child_argv
from harness import running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from journal.store import Journal

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
NOTICE = "_The agent had lost its memory of this session's earlier turns: it starts afresh from here._\n\n"


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


def fake(root: Path, *flags: str) -> tuple[str, ...]:
    return (sys.executable, FAKE_AGENT, "--store", str(root / "store.json"), *flags)


def said(updates) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


async def first_life(root: Path, argv: tuple[str, ...], runtimes: Runtimes, *prompts: str) -> str:
    """A session with `prompts` answered, by a server and an agent that are then gone."""
    runtime = runtimes.make(argv)
    async with (
        await Journal.open(root / "journal.db") as journal,
        running(AcpAgent(runtime, journal=journal)) as editor,
    ):
        await editor.initialize()
        sid = await editor.new_session(root)
        for prompt in prompts:
            await editor.prompt(sid, prompt)
    runtime.close()
    return sid


@asynccontextmanager
async def reloaded(
    root: Path,
    argv: tuple[str, ...],
    runtimes: Runtimes,
    sid: str,
    *,
    method: str = methods.SESSION_LOAD,
    capabilities=None,
):
    """A fresh server and agent on the same journal, the editor having loaded (or resumed) `sid`."""
    journal = await Journal.open(root / "journal.db")
    async with journal, running(AcpAgent(runtimes.make(argv), journal=journal)) as editor:
        await editor.initialize(capabilities)
        await editor.request(method, {"sessionId": sid, "cwd": str(root), "mcpServers": []})
        yield editor


async def test_a_fresh_server_loads_the_session_and_the_agent_below_remembers(tmp_path, runtimes):
    sid = await first_life(tmp_path, fake(tmp_path), runtimes, "first", "second")
    async with reloaded(tmp_path, fake(tmp_path), runtimes, sid) as editor:
        replayed = list(editor.updates[sid])
        users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert users == ["first", "second"]
        assert said(replayed) == "You said first; I remember nothing.You said second; I remember first."
        await editor.prompt(sid, "third")
        assert said(editor.updates[sid][len(replayed) :]) == "You said third; I remember first, second."

    sessions = json.loads((tmp_path / "store.json").read_text())
    assert list(sessions.values()) == [["first", "second", "third"]], "one session at the agent, brought back"


async def test_the_agent_is_brought_back_by_resume_when_it_offers_it(tmp_path, runtimes):
    sid = await first_life(tmp_path, fake(tmp_path, "--resume"), runtimes, "first")
    async with reloaded(tmp_path, fake(tmp_path, "--resume"), runtimes, sid, method=methods.SESSION_RESUME) as editor:
        await editor.prompt(sid, "again")
        assert said(editor.updates[sid]) == "You said again; I remember first."


async def test_a_late_replay_after_the_agents_load_is_not_shown(tmp_path, runtimes):
    argv = fake(tmp_path, "--late-replay", "--name", "gemini-cli")
    sid = await first_life(tmp_path, argv, runtimes, "first")
    async with reloaded(tmp_path, argv, runtimes, sid) as editor:
        loaded = len(editor.updates[sid])
        await editor.prompt(sid, "again")
        assert said(editor.updates[sid][loaded:]) == "You said again; I remember first."


async def test_an_agent_that_cannot_load_starts_afresh_and_the_editor_is_told(tmp_path, runtimes):
    sid = await first_life(tmp_path, fake(tmp_path), runtimes, "first")
    async with reloaded(tmp_path, fake(tmp_path, "--no-load"), runtimes, sid) as editor:
        loaded = len(editor.updates[sid])
        await editor.prompt(sid, "again")
        assert said(editor.updates[sid][loaded:]) == NOTICE + "You said again; I remember nothing."
        await editor.prompt(sid, "more")
        assert said(editor.updates[sid][loaded:]).endswith("You said more; I remember again.")


async def test_the_notice_is_a_notice_for_an_editor_that_shows_them(tmp_path, runtimes):
    sid = await first_life(tmp_path, fake(tmp_path), runtimes, "first")
    (tmp_path / "store.json").write_text("{}")  # the agent lost its sessions
    async with reloaded(tmp_path, fake(tmp_path), runtimes, sid, capabilities={"session": {"notices": {}}}) as editor:
        await editor.prompt(sid, "again")
        notices = [u for u in editor.updates[sid] if u["sessionUpdate"] == "notice"]
        assert [n["title"] for n in notices] == [NOTICE.strip("_\n")]


async def test_acp_server_as_the_agent_keeps_one_session_across_a_restart(tmp_path, runtimes):
    argv = child_argv(tmp_path, [])
    sid = await first_life(tmp_path, argv, runtimes, "one")
    async with reloaded(tmp_path, argv, runtimes, sid) as editor:
        assert said(editor.updates[sid]) == "one", "the child's own replay is not shown again"
        await editor.prompt(sid, "two")
        assert said(editor.updates[sid]) == "onetwo"

    async with await Journal.open(tmp_path / "child-journal.db") as child:
        (session,), _ = await child.list_sessions()
        assert len(await child.runs(session.id)) == 2


async def test_an_always_answer_is_kept_in_our_journal_across_a_restart(tmp_path, runtimes):
    """The agent announces its call with no input and asks about `ls -la`: the question shows the
    command, our "always" covers exactly it, and the agent is only ever told "once"."""
    asked = []

    async def always(params):
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    runtime = runtimes.make(fake(tmp_path))
    journal = await Journal.open(tmp_path / "journal.db")
    async with journal, running(AcpAgent(runtime, journal=journal)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = always
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "ask")
        assert said(editor.updates[sid]).endswith('answer={"outcome": {"outcome": "selected", "optionId": "yes"}}')
    runtime.close()
    ((question,),) = [asked]
    assert question["toolCall"]["rawInput"] == {"command": "ls -la"}
    assert [o["name"] for o in question["options"] if o["kind"] == "allow_always"] == ["Always allow `ls -la`"]
    async with reloaded(tmp_path, fake(tmp_path), runtimes, sid) as editor:
        loaded = len(editor.updates[sid])
        await editor.prompt(sid, "ask again")
        assert said(editor.updates[sid][loaded:]).endswith('"optionId": "yes"}}')
    assert len(asked) == 1, "the remembered answer decided, unasked"
