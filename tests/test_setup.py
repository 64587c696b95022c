"""Terminal Auth for the openai agent: `acp-server setup` asks on a real pseudo-terminal for the
endpoint, key and model, checks them against the fake model endpoint and saves them owner-only;
the method is offered only to an editor that can run it, and an editor that can is told at
`session/new` (auth_required) until the key is there, after which the same server works."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from pty_terminal import Terminal
from stdio_server import StdioServer

from acp_server.rpc.errors import AUTH_REQUIRED
from adapters.openai.setup import SETUP_METHOD, ConfigEditError, updated_config

ACP = [sys.executable, "-m", "acp_server"]
TIMEOUT = 30
KEY = "sk-test-setup-0123456789"
TERMINAL_AUTH = {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}
METHOD = {
    "id": SETUP_METHOD.id,
    "name": SETUP_METHOD.name,
    "description": SETUP_METHOD.description,
    "type": "terminal",
    "args": ["setup"],
}


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A config and data home of the test's own, no endpoint or key from the environment."""
    for name in list(os.environ):
        if name.startswith(("ACP_SERVER_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path


def config_file(home: Path) -> Path:
    return home / "config" / "acp-server" / "config.toml"


def answer_setup(url: str, key: str, model: str = "") -> str:
    terminal = Terminal()
    terminal.expect("Endpoint, an OpenAI-compatible base URL [https://api.openai.com/v1]: ")
    terminal.type(url)
    terminal.expect("Enter for none, as Ollama needs): ")
    terminal.type(key)
    terminal.expect("Model [m-one]: ")
    terminal.type(model)
    assert terminal.finish() == 0, terminal.seen.decode()
    return terminal.seen.decode()


def test_setup_asks_on_the_terminal_checks_the_endpoint_and_saves_the_answers_owner_only(home):
    with FakeOpenAI(models=["m-one", "m-two"]) as fake:
        shown = answer_setup(fake.base_url, KEY)
        listed = [r for r in fake.requests if r.route.endswith("/models")]

    assert KEY not in shown  # typed without echo
    assert "The endpoint answered with 2 models: m-one, m-two." in shown
    path = config_file(home)
    assert tomllib.loads(path.read_text()) == {"openai": {"base_url": fake.base_url, "api_key": KEY, "model": "m-one"}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [r.headers.get("authorization") or r.headers.get("Authorization") for r in listed] == [f"Bearer {KEY}"]
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary file left


def test_an_editor_that_can_run_terminal_auth_is_offered_setup_and_then_the_same_server_works(home, tmp_path):
    server = StdioServer("--agent", "openai", cwd=str(tmp_path))  # OpenAI's endpoint, no key yet
    try:
        assert server.call("initialize", TERMINAL_AUTH)["authMethods"] == [METHOD]
        refused = server.response(server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        assert refused["error"]["code"] == AUTH_REQUIRED
        assert "No API key for https://api.openai.com/v1" in refused["error"]["message"]
        assert "acp-server setup" in refused["error"]["message"]

        with FakeOpenAI(models=["m-one"]) as fake:
            fake.script(reply("Hello from the model."))
            answer_setup(fake.base_url, KEY)  # as the editor runs it: its command, plus `setup`
            session = server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
            done = server.call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]})
        texts = [
            f["params"]["update"]["content"]["text"]
            for f in server.frames
            if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
    finally:
        server.kill()

    assert done["stopReason"] == "end_turn"
    assert "".join(texts) == "Hello from the model."
    assert fake.chats[0]["model"] == "m-one"


@pytest.mark.parametrize(
    ("capabilities", "offered"),
    [
        ({}, False),
        ({"auth": {"terminal": False}}, False),
        ({"auth": {"terminal": True}}, True),
        ({"_meta": {"terminal-auth": True}}, True),  # how clients asked before auth.terminal
    ],
)
def test_the_terminal_method_is_offered_only_to_an_editor_that_says_it_can_run_it(
    home, tmp_path, capabilities, offered
):
    server = StdioServer("--agent", "openai", cwd=str(tmp_path))
    try:
        init = server.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        answer = server.response(server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    finally:
        server.kill()

    assert init["authMethods"] == ([METHOD] if offered else [])
    # Without the method to offer, the missing key is the first prompt's to report, as before.
    assert ("error" in answer) is offered


def test_enter_keeps_the_saved_key_and_other_settings_and_tables_stay(home):
    path = config_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(
        '# mine\n[openai]\napi_key = "sk-old-key-00000000"  # note\nmax_turn_requests = 40\n\n'
        '[agents.claude]\ncommand = ["claude-agent-acp"]\n'
    )
    path.chmod(0o644)
    with FakeOpenAI(models=["m-one"]) as fake:
        terminal = Terminal()
        terminal.expect("[https://api.openai.com/v1]: ")
        terminal.type(fake.base_url)
        terminal.expect("Enter keeps the saved one, set (sk-…0000)): ")
        terminal.type("")
        terminal.expect("Model [m-one]: ")
        terminal.type("m-two")
        assert terminal.finish() == 0, terminal.seen.decode()

    assert tomllib.loads(path.read_text()) == {
        "openai": {
            "base_url": fake.base_url,
            "api_key": "sk-old-key-00000000",
            "max_turn_requests": 40,
            "model": "m-two",
        },
        "agents": {"claude": {"command": ["claude-agent-acp"]}},
    }
    assert path.read_text().startswith("# mine\n[openai]\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_endpoint_that_does_not_answer_is_asked_again_and_ctrl_d_saves_nothing(home, tmp_path):
    with FakeOpenAI() as fake:
        gone = fake.base_url  # nothing listens there once the fake has stopped
    terminal = Terminal()
    terminal.expect("base URL [https://api.openai.com/v1]: ")
    terminal.type(gone)
    terminal.expect("): ")
    terminal.type("")
    shown = terminal.expect("Save these answers anyway? [y/N] ")
    terminal.type("n")
    terminal.expect(f"base URL [{gone}]: ")  # from the top, with what was typed as the default
    os.write(terminal.master, b"\x04")  # Ctrl-D
    assert terminal.finish() == 1
    assert f"The endpoint did not answer: Cannot reach the model endpoint {gone}" in shown
    assert "Set OPENAI_BASE_URL" not in shown  # it is being set here: the question comes again
    assert "Nothing saved." in terminal.seen.decode()
    assert not config_file(home).exists()


def test_setup_without_a_terminal_says_so_and_saves_nothing(home):
    done = subprocess.run([*ACP, "setup"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2
    assert done.stderr.startswith("acp-server setup: it asks its questions on a terminal;")
    assert done.stderr.count("\n") == 1
    assert not config_file(home).exists()


# --- the config file's text, edited ---------------------------------------------------------


def test_a_new_file_gets_an_openai_table():
    assert updated_config("", {"base_url": "http://h/v1", "api_key": None}) == '[openai]\nbase_url = "http://h/v1"\n'


def test_values_are_written_as_toml_strings_whatever_they_hold():
    odd = 'a "quoted" \\ back\\slash\ttab é'
    text = updated_config("[other]\nx = 1\n", {"api_key": odd})
    assert tomllib.loads(text) == {"other": {"x": 1}, "openai": {"api_key": odd}}


def test_none_removes_a_key_and_comments_and_other_tables_stay():
    text = '[openai]\n# keep me\nmodel = "a"\napi_key = "k"\n[agents.x]\ncommand = "x"\n'
    assert updated_config(text, {"api_key": None, "model": "b"}) == (
        '[openai]\n# keep me\nmodel = "b"\n[agents.x]\ncommand = "x"\n'
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[openai\n", "it is not valid TOML"),
        ('openai.model = "a"\n', "not written as an [openai] table"),
        ('openai = {model = "a"}\n', "not written as an [openai] table"),
        ('[openai]\napi_key = """\nk\n"""\n', "cannot edit safely"),
    ],
)
def test_a_file_setup_cannot_edit_safely_is_left_alone_with_a_reason(text, problem):
    with pytest.raises(ConfigEditError, match=problem.replace("[", r"\[")):
        updated_config(text, {"api_key": "new"})
