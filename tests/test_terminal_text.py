"""Hostile text never drives the user's terminal: escape sequences, C1 controls, bidi overrides
and newlines from a model or an agent below are shown visibly (`^[`, `M-^[`, `^J`) or dropped
by every command that prints them. Each attack is played through the real CLI as a subprocess
(the scripted agent, an ACP agent below, a fake model endpoint, a real journal) and the raw
bytes it wrote are checked: nothing a terminal acts on, and the visible form in its place.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from hostile_text import CASES, inert, inert_json
from pty_terminal import Terminal
from stdio_server import StdioServer
from test_prompt_cli import read_until

from adapters.printable import printable, printable_json

ACP = [sys.executable, "-m", "acp_server"]
TIMEOUT = 60


def acp(cwd: Path, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*ACP, *args], cwd=cwd, capture_output=True, timeout=TIMEOUT, stdin=stdin, start_new_session=True
    )


def hostile_steps(hostile: str) -> list[dict[str, Any]]:
    """Every field a turn shows: title, thought, reply, plan entry, tool title and output, error."""
    return [
        {"title": f"title:{hostile}"},
        {"think": f"thought:{hostile}"},
        {"say": f"reply:{hostile}\n"},
        {"plan": [{"content": f"plan:{hostile}"}]},
        {"tool": f"tool:{hostile}", "kind": "read", "result": f"output:{hostile}"},
        {"error": f"error:{hostile}"},
    ]


def script(root: Path, steps: list[dict[str, Any]]) -> str:
    path = root / "script.json"
    path.write_text(json.dumps({"scenarios": [{"match": "go", "steps": steps}]}), encoding="utf-8")
    return str(path)


def scripted(root: Path, steps: list[dict[str, Any]]) -> tuple[str, ...]:
    return ("--agent", "scripted", "--script", script(root, steps), "--db", str(root / "journal.db"))


# --- the function ----------------------------------------------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_untrusted_text_is_made_printable_in_text_and_in_one_line_fields(hostile: str, text: str, field: str) -> None:
    assert printable(hostile) == text
    assert printable(hostile, one_line=True) == field
    assert printable(text) == text  # twice changes nothing
    assert printable_json({hostile: [hostile, 1, None]}) == {text: [text, 1, None]}


def test_text_keeps_its_lines_and_tabs_and_a_field_shows_them() -> None:
    assert printable("a\tb\r\nc\x7f\ud800") == "a\tb\nc^?\ufffd"
    assert printable("a\tb\r\nc", one_line=True) == "a^Ib^M^Jc"
    assert printable("plain text, ünïcödé, 漢字 and emoji 🙂") == "plain text, ünïcödé, 漢字 and emoji 🙂"


# --- prompt ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_prompt_shows_every_field_of_a_hostile_turn_visibly(tmp_path: Path, hostile: str, text: str, field: str):
    done = acp(tmp_path, "prompt", *scripted(tmp_path, hostile_steps(hostile)), "go")

    out, err = inert(done.stdout), inert(done.stderr)
    assert done.returncode == 1, err
    assert f"[title] title:{field}\n" in out
    assert f"reply:{text}\n" in out
    assert f"  [ ] plan:{field}\n" in out
    assert f"[tool] tool:{field} (read) pending\n" in out
    assert "    output:" + text.replace("\n", "\n    ") + "\n" in out
    assert f"error:{text}" in err


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_prompt_json_carries_no_control_even_for_jq_r(tmp_path: Path, hostile: str, text: str, field: str):
    done = acp(tmp_path, "prompt", "--json", *scripted(tmp_path, hostile_steps(hostile)), "go")

    updates = [json.loads(line)["update"] for line in inert(done.stdout).splitlines()]
    inert(done.stderr)
    inert_json(updates)
    said = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(said) == f"reply:{text}\n"
    assert {"sessionUpdate": "session_info_update", "title": f"title:{text}"} in updates


# --- the journal commands --------------------------------------------------------------------


@pytest.fixture(scope="module", params=[pytest.param(case.values, id=case.id) for case in CASES])
def journal(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, ...]]:
    """A real journal holding one hostile turn (its title, reply, plan, tool and error)."""
    hostile, text, field = request.param
    root = tmp_path_factory.mktemp("journal")
    options = scripted(root, hostile_steps(hostile))
    assert acp(root, "prompt", *options, "go").returncode == 1
    session = json.loads(acp(root, "sessions", *options, "--json").stdout)["sessionId"]
    yield root, options, session, text, field


def run_id(journal: tuple[Any, ...]) -> str:
    root, options, session, _, _ = journal
    return inert(acp(root, "runs", *options, session).stdout).split()[0]


def test_show_prints_a_hostile_session_visibly(journal: tuple[Any, ...]) -> None:
    root, options, session, text, field = journal
    done = acp(root, "show", *options, session)

    out = inert(done.stdout)
    assert f"reply:{text}\n" in out
    assert f"[tool] tool:{field} (read) pending\n" in out
    assert f"  [ ] plan:{field}\n" in out


def test_sessions_shows_a_hostile_title_on_its_own_row(journal: tuple[Any, ...]) -> None:
    root, options, session, _, field = journal
    done = acp(root, "sessions", *options)

    _header, row = inert(done.stdout).splitlines()  # no forged row
    assert row.startswith(session) and f"title:{field[:40]}" in row


def test_sessions_json_carries_the_title_printable(journal: tuple[Any, ...]) -> None:
    root, options, _, text, _ = journal
    done = acp(root, "sessions", *options, "--json")

    (listed,) = [json.loads(line) for line in inert(done.stdout).splitlines()]
    inert_json(listed)
    assert listed["title"].startswith(f"title:{text}"[:60])


def test_runs_shows_a_hostile_error_on_the_runs_row(journal: tuple[Any, ...]) -> None:
    root, options, session, _, field = journal
    done = acp(root, "runs", *options, session)

    (row,) = inert(done.stdout).splitlines()
    assert row.endswith(f"error:{field}")


def test_events_shows_each_hostile_event_on_one_row(journal: tuple[Any, ...]) -> None:
    root, options, _, _, _ = journal
    run = run_id(journal)
    table = acp(root, "events", *options, run)

    rows = inert(table.stdout).splitlines()
    assert len(rows) == len(acp(root, "events", *options, run, "--json").stdout.splitlines())
    assert all(row.startswith(f"{run}:") for row in rows)


def test_events_json_carries_every_string_printable(journal: tuple[Any, ...]) -> None:
    root, options, _, text, _ = journal
    done = acp(root, "events", *options, run_id(journal), "--json")

    events = [json.loads(line) for line in inert(done.stdout).splitlines()]
    inert_json(events)
    assert any(e["payload"].get("text") == f"reply:{text}\n" for e in events)


def test_export_carries_every_string_printable(journal: tuple[Any, ...]) -> None:
    root, options, session, text, _ = journal
    done = acp(root, "export", *options, session)

    document = json.loads(inert(done.stdout))
    inert_json(document)
    assert any(e["payload"].get("text") == f"reply:{text}\n" for e in document["events"])


# --- attach, following the journal of another server ---------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_attach_shows_a_hostile_running_turn_visibly(tmp_path: Path, hostile: str, text: str, field: str):
    gate = {"tool": "gate", "kind": "edit", "ask": True, "result": "passed"}
    options = scripted(tmp_path, [*hostile_steps(hostile)[:5], gate, {"say": "after"}])
    server = StdioServer(*options, cwd=str(tmp_path))
    try:
        session = server.start_session(str(tmp_path))
        prompted = server.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
        while (frame := server.next_frame()) is not None and frame.get("method") != "session/request_permission":
            pass
        assert frame is not None, server.exit_report()
        watching = subprocess.Popen(
            [*ACP, "attach", *options, session],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        shown = read_until(watching.stdout, b"[tool] gate (edit) pending\n")
        server.send(
            {
                "jsonrpc": "2.0",
                "id": frame["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
            }
        )
        assert server.response(prompted)["result"]["stopReason"] == "end_turn"
        out, err = watching.communicate(timeout=TIMEOUT)
    finally:
        server.kill()

    shown_text = inert(shown + out)
    inert(err)
    assert f"[title] title:{field}\n" in shown_text
    assert f"reply:{text}\n" in shown_text
    assert f"[tool] tool:{field} (read) pending\n" in shown_text
    assert shown_text.endswith("after\n")


# --- the permission question on the terminal ------------------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_the_permission_question_shows_a_hostile_title_and_option_labels_on_its_line(
    tmp_path: Path, hostile: str, text: str, field: str
):
    steps = [
        {"tool": f"tool:{hostile}", "kind": "execute", "ask": True, "result": "ran"},
        {"ask_user": "pick one", "choices": [f"choice:{hostile}", "plain"]},
    ]
    terminal, stdin = os.openpty()
    try:
        with subprocess.Popen(
            [*ACP, "prompt", *scripted(tmp_path, steps), "go"],
            cwd=tmp_path,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as proc:
            os.close(stdin)
            asked = read_until(proc.stderr, b"Choose 1-3: ")  # no "always" for a call that names no command
            os.write(terminal, b"1\n")
            asked += read_until(proc.stderr, b"Choose 1-3: ")
            os.write(terminal, b"2\n")
            out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(terminal)

    question = inert(asked + err)
    inert(out)
    assert proc.returncode == 0, question
    assert f"\nPermission requested: tool:{field} (execute)\n  1) Allow once\n" in "\n" + question
    assert f"\n  1) choice:{field}\n  2) plain\n" in question


# --- an agent's stderr in the log and in errors ---------------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_an_agent_below_writing_hostile_stderr_is_logged_and_quoted_visibly(
    tmp_path: Path, hostile: str, text: str, field: str
):
    agent = tmp_path / "agent.py"
    agent.write_text(f"import sys\nsys.stderr.write({'stderr:' + hostile!r} + '\\n')\nsys.exit(3)\n", encoding="utf-8")
    done = acp(
        tmp_path,
        "prompt",
        "--db",
        str(tmp_path / "j.db"),
        "--log-level",
        "INFO",
        "--agent",
        "acp",
        "go",
        "--",
        sys.executable,
        str(agent),
    )

    err = inert(done.stderr)
    lines = ("stderr:" + text).split("\n")  # an agent's lines are its own: each logged as one
    assert all(f"acp_server.downstream.process: acp: {line}\n" in err for line in lines)
    quoted = err.split("error: the ACP server did not start: ", 1)[1]
    # the cause is the line's words: the space left where a bidi control stood is trimmed
    assert quoted.startswith(f"acp: the agent did not start (it exited: {lines[-1].strip()})\n")


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_the_error_an_editor_gets_quotes_a_hostile_stderr_line_printable(
    tmp_path: Path, hostile: str, text: str, field: str
):
    agent = tmp_path / "agent.py"
    agent.write_text(f"import sys\nsys.stderr.write({'stderr:' + hostile!r} + '\\n')\nsys.exit(3)\n", encoding="utf-8")
    server = StdioServer("--db", str(tmp_path / "j.db"), "--agent", "acp", "--", sys.executable, str(agent))
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        answer = server.response(server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    finally:
        server.kill()

    message = answer["error"]["message"]
    inert(message.encode())
    assert message.endswith(f"(it exited: {('stderr:' + text).split(chr(10))[-1].strip()})")


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_a_log_line_quoting_hostile_text_is_printable(tmp_path: Path, hostile: str, text: str, field: str):
    (tmp_path / "chatty.py").write_text(
        f"import logging\n\ndef run(prompt, session):\n"
        f"    logging.getLogger('chatty').warning('the model said %s', {hostile!r})\n    return 'ok'\n",
        encoding="utf-8",
    )
    done = acp(tmp_path, "prompt", "--db", str(tmp_path / "j.db"), "--agent", "chatty:run", "go")

    assert inert(done.stdout) == "ok\n"
    assert f"WARNING chatty: the model said {text}\n" in inert(done.stderr)


# --- setup's model list ---------------------------------------------------------------------


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_setup_lists_hostile_model_ids_visibly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: str, text: str, field: str
):
    for name in list(os.environ):
        if name.startswith(("ACP_SERVER_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with FakeOpenAI(models=[f"model:{hostile}", "m-two"]) as fake:
        terminal = Terminal()
        terminal.expect("base URL [https://api.openai.com/v1]: ")
        terminal.type(fake.base_url)
        terminal.expect("Enter for none, as Ollama needs): ")
        terminal.type("")
        terminal.expect(f"Model [model:{field}]: ")
        terminal.type("")
        assert terminal.finish() == 0

    seen = inert(terminal.seen.replace(b"\r\n", b"\n"))  # the terminal's own line ends
    assert f"The endpoint answered with 2 models: model:{field}, m-two.\n" in seen


HEALTH = """
from adapters.base import Health
from adapters.callable import SimpleAdapter


class Hostile(SimpleAdapter):
    name = "hostile"

    def health(self):
        return Health(True, "detail:" + HOSTILE, {"model": ("model:" + HOSTILE, "src")})
"""


@pytest.mark.parametrize(("hostile", "text", "field"), CASES)
def test_doctor_shows_an_agents_hostile_health_visibly(tmp_path: Path, hostile: str, text: str, field: str):
    (tmp_path / "hostile_agent.py").write_text(f"HOSTILE = {hostile!r}\n{HEALTH}", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [*ACP, "doctor", "--agent", "hostile_agent:Hostile"],
        cwd=tmp_path,
        capture_output=True,
        timeout=TIMEOUT,
        env=env,
    )

    out = inert(done.stdout)
    (row,) = [line for line in out.splitlines() if line.startswith("> hostile_agent:Hostile")]
    squeezed = " ".join(f"detail:{hostile}".split())  # doctor's own: a detail's whitespace runs become one space
    assert row.endswith(f"  ok           {printable(squeezed, one_line=True)}".rstrip())
    assert re.search(f"model:{re.escape(field)} +src\n", out)
