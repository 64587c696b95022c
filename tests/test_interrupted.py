"""A turn cut off by a dead process is replayed as interrupted, whenever its owner died: a killed
owner not yet reaped is dead already, and a server that opened the journal before the owner died
settles the run when it replays it (real processes, a real journal shared between them)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from harness import running
from runner_fronts import ended, wait_until
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from acp_server.turns.replay import INTERRUPTED_NOTICE
from adapters.scripted import ScriptedAdapter
from journal import owners
from journal.states import RunState
from journal.store import Journal

SCRIPT = {
    "scenarios": [
        {"match": "long", "steps": [{"say": "working "}, {"sleep": 60}, {"say": "never said"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


def test_an_owner_killed_but_not_yet_reaped_counts_as_dead():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        token = owners.process_token(child.pid)
        assert owners.is_alive(child.pid, token)
        child.send_signal(signal.SIGKILL)
        wait_until(lambda: ended(child.pid), what="the child to die")  # and it is not reaped: a zombie
        assert not owners.is_alive(child.pid, token)
        assert not owners.is_alive(child.pid, "")  # where no token was recorded, too
    finally:
        child.wait()


async def test_a_server_already_running_replays_a_turn_whose_server_was_killed_as_interrupted(tmp_path):
    db = tmp_path / "journal.db"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    journal = await Journal.open(db)  # open before the other server's turn starts, and dies
    try:
        async with running(AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal)) as editor:
            await editor.initialize()
            other = StdioServer("--agent", "scripted", "--script", str(script), "--db", str(db), cwd=str(tmp_path))
            try:
                sid = other.start_session(str(tmp_path))
                other.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
                while "working" not in json.dumps(other.next_frame()):
                    pass
            finally:
                other.kill()  # SIGKILL, and reaped
            await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            [run] = await journal.runs(sid)
            replayed = editor.text(sid)
    finally:
        await journal.close()
    assert replayed == "working " + INTERRUPTED_NOTICE
    assert run.status is RunState.INTERRUPTED
