"""An agent's own transcript: saved through the sink, journaled, handed back on the next turn and
after a restart exactly as saved, with the turns it did not see (a cut-off turn) as plain text."""

from __future__ import annotations

import threading

import anyio
from harness import running

from acp_server.acp.handlers import AcpAgent
from adapters.base import Message, Transcript
from adapters.callable import SimpleAdapter
from adapters.conversation import Conversation
from adapters.events import TranscriptSaved
from journal.store import Journal

FORMAT = "test-chat"


class TranscriptAgent(SimpleAdapter):
    """Saves each turn as tool-call-like messages; "hang" waits to be cancelled without saving."""

    name = "transcript"

    def __init__(self) -> None:
        self.seen: list[Transcript | None] = []
        self.hanging = threading.Event()

    def run_turn(self, turn, sink):
        self.seen.append(turn.transcript)
        if turn.text == "hang":
            self.hanging.set()
            sink.sleep(30)
        if turn.text == "compact":
            sink.save_transcript(FORMAT, [{"role": "system", "content": "summary"}], base=True)
        else:
            since = [{"role": m.role, "content": m.text} for m in turn.transcript.since] if turn.transcript else []
            call = {"role": "assistant", "tool_calls": [{"id": f"call_{turn.text}", "name": "read", "args": {"p": 1}}]}
            sink.save_transcript(FORMAT, [*since, {"role": "user", "content": turn.text}, call])
        sink.text(f"did {turn.text}")
        return "end_turn"


def test_saves_extend_the_transcript_a_base_replaces_it_and_unsaved_turns_wait_in_since():
    conversation = Conversation()
    conversation.add_turn("plain", "reply")
    assert conversation.transcript() is None
    conversation.add_turn("one", "r1", [TranscriptSaved(FORMAT, ({"n": 1},))])
    conversation.add_turn("cut off", "", [])
    assert conversation.transcript() == Transcript(FORMAT, ({"n": 1},), (Message("user", "cut off"),))
    conversation.add_turn("two", "r2", [TranscriptSaved(FORMAT, ({"n": 2},)), TranscriptSaved(FORMAT, ({"n": 3},))])
    assert conversation.transcript() == Transcript(FORMAT, ({"n": 1}, {"n": 2}, {"n": 3}))
    conversation.add_turn("compact", "", [TranscriptSaved(FORMAT, ({"summary": True},), base=True)])
    assert conversation.transcript() == Transcript(FORMAT, ({"summary": True},))
    conversation.add_turn("other agent", "", [TranscriptSaved("other", ({"x": 1},))])
    assert conversation.transcript() == Transcript("other", ({"x": 1},))
    texts = ["plain", "reply", "one", "r1", "cut off", "two", "r2", "compact", "other agent"]
    assert [m.text for m in conversation.messages] == texts


async def test_the_next_turn_and_a_restarted_server_get_the_transcript_as_saved(tmp_path):
    db = tmp_path / "journal.db"
    agent = TranscriptAgent()
    journal = await Journal.open(db)
    async with running(AcpAgent(agent, journal=journal)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "one")
        await editor.prompt(sid, "two")
        live = agent.seen[-1]
    await journal.close()
    assert agent.seen[0] is None
    assert live is not None and [m.get("content") for m in live.messages] == ["one", None]
    assert live.messages[1]["tool_calls"][0] == {"id": "call_one", "name": "read", "args": {"p": 1}}

    journal = await Journal.open(db)
    async with running(AcpAgent(agent, journal=journal)) as editor:
        await editor.initialize()
        await editor.prompt(sid, "three")
    await journal.close()
    restored = agent.seen[-1]
    assert restored is not None
    assert [m.get("tool_calls", [{}])[0].get("id") for m in restored.messages[1::2]] == ["call_one", "call_two"]
    assert restored == Transcript(FORMAT, restored.messages)  # nothing pending: every turn saved


async def test_a_cut_off_turn_reaches_the_next_one_as_plain_text_live_and_after_a_restart(tmp_path):
    db = tmp_path / "journal.db"
    agent = TranscriptAgent()
    journal = await Journal.open(db)
    async with running(AcpAgent(agent, journal=journal)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "one")
        hang = await editor.start_prompt(sid, "hang")
        await anyio.to_thread.run_sync(agent.hanging.wait, 5)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await hang)["result"] == {"stopReason": "cancelled"}
        await editor.prompt(sid, "two")
    await journal.close()
    assert agent.seen[-1] is not None and agent.seen[-1].since == (Message("user", "hang"),)

    journal = await Journal.open(db)
    async with running(AcpAgent(agent, journal=journal)) as editor:
        await editor.initialize()
        await editor.prompt(sid, "compact")
        await editor.prompt(sid, "after")
    await journal.close()
    restored_before_compact, after_compact = agent.seen[-2], agent.seen[-1]
    assert restored_before_compact is not None
    contents = [m.get("content") for m in restored_before_compact.messages]
    assert contents == ["one", None, "hang", "two", None]  # the cut-off turn, folded in by the agent
    assert after_compact == Transcript(FORMAT, ({"role": "system", "content": "summary"},))
