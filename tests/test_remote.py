"""`acp-server --remote HOST`: runner mode on another machine over `ssh -T`, tried through a real
OpenSSH server on 127.0.0.1 (local_sshd): a front killed mid-turn (a dropped link) leaves the
turn running there and the next front reattaches, each update once and the open question asked
again; options reach the remote server word for word; a missing ssh or remote acp-server is
named in one line; `setup` with --remote asks on a terminal there. Skipped where sshd cannot be
started (CI installs it, and there the tests fail instead)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import local_sshd
import pytest
from fake_openai import FakeOpenAI
from pty_terminal import Terminal
from runner_fronts import Front, gone, runners, short_runtime_dir, wait_until

ACP = [sys.executable, "-m", "acp_server"]
HERE = f"{sys.executable} -m acp_server"
KEY = "sk-test-remote-0123456789"  # this checkout's acp-server, as the remote command
GATE = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
WORDS = [f"w{i} " for i in range(1000)]
SCRIPT = {
    "scenarios": [
        {
            "match": "stream",
            "steps": [
                *(
                    step
                    for n, word in enumerate(WORDS)
                    for step in ([{"say": word}, {"sleep": 0.01}] if n % 10 == 9 else [{"say": word}])
                ),
                GATE,  # still live when the next front has loaded, however fast the turn ran
                {"say": "THE END"},
            ],
        },
        {"match": "gate", "steps": [{"say": "before "}, GATE, {"say": "after"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    problem = local_sshd.missing()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the remote tests must run in CI: {problem}")
        pytest.skip(problem)
    server = local_sshd.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def remote(sshd, tmp_path, monkeypatch):
    """The front's options for a remote front on the local sshd, with the runner and data
    directories of this test (ssh sends them along), and a scripted agent there."""
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    mode = ("--remote", local_sshd.HOST, "--ssh", sshd.ssh, "--remote-command", HERE)
    yield mode, ("--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "journal.db"))
    started = [r["pid"] for r in runners()]
    subprocess.run([*ACP, "runner", "stop"], capture_output=True, timeout=60)
    for pid in started:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def updates(frames):
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def text(frames) -> str:
    return "".join(u["content"]["text"] for u in updates(frames) if u["sessionUpdate"] == "agent_message_chunk")


def read_until(front: Front, predicate) -> list[dict]:
    frames = []
    while True:
        frame = front.next_frame()
        assert frame is not None, f"the front closed its stdout{front.exit_report()}"
        frames.append(frame)
        if predicate(frame):
            return frames


def is_permission(frame) -> bool:
    return frame.get("method") == "session/request_permission"


def allow(front: Front, request: dict) -> None:
    answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    front.send({"jsonrpc": "2.0", "id": request["id"], "result": answer})


def reattach(remote, cwd: Path, sid: str) -> tuple[Front, list[dict]]:
    """A new front over a new ssh link, the session loaded: the front and the replayed frames."""
    front = Front(*remote[1], cwd=str(cwd), mode=remote[0])
    front.initialize()
    load_id = front.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    frames = read_until(front, lambda f: f.get("id") == load_id and "method" not in f)
    assert "result" in frames[-1], frames[-1]
    return front, frames[:-1]


def run_states(db: Path) -> list[str]:
    return [row[0] for row in sqlite3.connect(db).execute("SELECT status FROM runs ORDER BY seq_no")]


def test_a_link_dropped_mid_turn_leaves_the_turn_running_there_and_the_next_link_gets_every_update_once(
    remote, tmp_path
):
    first = Front(*remote[1], cwd=str(tmp_path), mode=remote[0])
    first.initialize()
    sid = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]})
    shown = read_until(first, lambda f: "w50 " in text([f]))  # frames need not start where the agent paused
    first.kill_group()  # the local ssh dies, as with a dropped link or a closed laptop

    second, replayed = reattach(remote, tmp_path, sid)
    live = read_until(second, is_permission)  # the gate, asked again over the new link
    allow(second, live[-1])
    waiting = second.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]})
    rest = read_until(second, lambda f: f.get("id") == waiting and "method" not in f)

    assert text(shown) and "".join(WORDS).startswith(text(shown))
    assert rest[-1]["result"] == {"stopReason": "end_turn"}
    assert text(replayed) + text(live) + text(rest) == "".join(WORDS) + "THE END" + "short reply"
    assert run_states(tmp_path / "journal.db") == ["completed", "completed"]
    assert len(runners()) == 1  # the second link found the runner of the first


def test_a_question_open_when_the_link_dropped_is_asked_again_over_the_next_one(remote, tmp_path):
    first = Front(*remote[1], cwd=str(tmp_path), mode=remote[0])
    first.initialize()
    sid = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "gate"}]})
    asked = read_until(first, is_permission)[-1]
    first.kill_group()

    second, replayed = reattach(remote, tmp_path, sid)
    again = read_until(second, is_permission)[-1]
    allow(second, again)
    rest = read_until(second, lambda f: text([f]) == "after")

    assert again["params"]["toolCall"]["toolCallId"] == asked["params"]["toolCall"]["toolCallId"]
    assert text(replayed) == "before " and text(rest) == "after"
    wait_until(lambda: run_states(tmp_path / "journal.db") == ["completed"], what="the run to complete")


def test_options_reach_the_remote_server_word_for_word(remote, tmp_path):
    odd = tmp_path / 'it\'s a "journal"; $HOME `x` \\ é.db'
    options = (*remote[1][:-1], str(odd), "--max-workers", "3")
    front = Front(*options, cwd=str(tmp_path), mode=remote[0])
    front.initialize()
    front.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    (runner,) = runners()
    assert runner["config"]["db"] == str(odd)
    assert runner["config"]["max_workers"] == 3
    assert odd.is_file()


def test_a_remote_host_without_acp_server_is_named_in_one_line(sshd):
    done = subprocess.run(
        [*ACP, "--remote", local_sshd.HOST, "--ssh", sshd.ssh, "--remote-command", "~/no/such/acp-server"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 127
    assert done.stdout == ""
    assert done.stderr.startswith(
        f"acp-server: {Path.home()}/no/such/acp-server is not on {local_sshd.HOST} (PATH there: "
    ), done.stderr
    assert done.stderr.endswith(f"); install acp-server on {local_sshd.HOST}, or name it with --remote-command\n")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("ssh", [None, "/no/such/ssh -v"])
def test_without_ssh_the_front_says_so_in_one_line(tmp_path, ssh):
    environ = {**os.environ, "PATH": str(tmp_path)}  # an empty directory: no ssh on it
    words = ["--ssh", ssh] if ssh else []
    done = subprocess.run(
        [*ACP, "--remote", "somewhere", *words],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    program = ssh.split()[0] if ssh else "ssh"
    assert (done.returncode, done.stdout) == (127, "")
    assert done.stderr == (
        f"acp-server: --remote needs ssh, and {program!r} is not on PATH; install OpenSSH's client "
        "(or name the program with --ssh)\n"
    )


def test_setup_with_remote_asks_on_a_terminal_there_and_saves_its_config_file(remote, tmp_path):
    with FakeOpenAI(models=["m-one"]) as fake:
        terminal = Terminal(*remote[0])
        terminal.expect("base URL [https://api.openai.com/v1]: ")
        terminal.type(fake.base_url)
        terminal.expect("): ")
        terminal.type(KEY)
        terminal.expect("Model [m-one]: ")
        terminal.type("")
        assert terminal.finish() == 0, terminal.seen.decode()

    saved = tmp_path / "config" / "acp-server" / "config.toml"  # the remote's XDG_CONFIG_HOME, sent along
    assert f'api_key = "{KEY}"' in saved.read_text()
    assert KEY not in terminal.seen.decode()
    assert oct(saved.stat().st_mode & 0o777) == oct(0o600)
