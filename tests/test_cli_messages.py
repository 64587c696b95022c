"""What the command line tells someone new to it: the bare server started at a terminal says
what it waits for, `--help` names every agent and where the endpoint and key come from, an
unknown agent gets the nearest name, and a config file named but missing stops at start-up.
Each command runs as a real subprocess, a terminal being a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from schema_check import check_agent_frame
from test_prompt_cli import read_until

from adapters.registry import agent_specs

ACP = [sys.executable, "-m", "acp_server"]
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
TIMEOUT = 60


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_SERVER_", "OPENAI_"))}
    # Wide help (argparse wraps at COLUMNS), a config and a journal of the test's own.
    return {**environ, "COLUMNS": "1000", "XDG_CONFIG_HOME": str(tmp_path / "config"), **extra}


def acp(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACP, *args, "--db", str(tmp_path / "j.db")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        env=environment(tmp_path, **env),
        start_new_session=True,  # no terminal to ask permission on
    )


# --- the bare server at a terminal ----------------------------------------------------------


def test_the_bare_server_started_at_a_terminal_says_how_to_try_it_on_stderr_and_serves_json(tmp_path):
    terminal, stdin = os.openpty()
    server = subprocess.Popen(
        [*ACP, "--agent", "echo", "--db", str(tmp_path / "j.db")],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(tmp_path),
    )
    os.close(stdin)
    try:
        assert server.stdout is not None and server.stderr is not None
        hint = read_until(server.stderr, b"\n").decode()
        os.write(terminal, json.dumps(INIT).encode() + b"\n")
        answer = json.loads(read_until(server.stdout, b"\n"))
        os.write(terminal, b"\x04")  # Ctrl-D: the end of input
        out, err = server.communicate(timeout=TIMEOUT)
    finally:
        os.close(terminal)
        if server.poll() is None:  # a failed step must not leave it waiting for input
            server.kill()
            server.communicate()

    assert hint == (
        "acp-server: serving ACP (JSON-RPC, one JSON object per line) on stdin/stdout, for an editor to start; "
        'to try it from a terminal, run acp-server prompt "hello" with the same options (Ctrl-D quits)\n'
    )
    check_agent_frame(answer, "initialize")
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1
    assert (server.returncode, out, err) == (0, b"", b"")


def test_the_bare_server_started_by_an_editor_on_a_pipe_says_nothing_on_stderr(tmp_path):
    done = subprocess.run(
        [*ACP, "--agent", "echo", "--db", str(tmp_path / "j.db")],
        input=json.dumps(INIT) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment(tmp_path),
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["id"] == 0


# --- help and agent names -------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["prompt"], ["doctor"], ["attach"]])  # not the journal commands: test_inspect
def test_help_names_every_built_in_agent_and_where_the_endpoint_and_key_come_from(tmp_path, command):
    done = acp(tmp_path, *command, "--help")
    builtins = [spec.name for spec in agent_specs() if not spec.origin.startswith("entry point")]

    assert done.returncode == 0, done.stderr
    assert "hermes" in builtins
    assert f"agent to serve: a built-in ({', '.join(builtins)}), an installed agent's name, or module:factory" in (
        done.stdout
    )
    assert "--base-url BASE_URL" in done.stdout and "[env ACP_SERVER_BASE_URL]" in done.stdout
    assert (
        "The openai agent's endpoint is --base-url, else OPENAI_BASE_URL, else base_url in the config file; "
        "its key is OPENAI_API_KEY, else api_key there. The config file (an [openai] table) is $ACP_SERVER_CONFIG"
    ) in done.stdout


@pytest.mark.parametrize(("typed", "nearest"), [("opnai", "openai"), ("hermez", "hermes"), ("Echo", "echo")])
def test_an_unknown_agent_names_the_nearest_known_one(tmp_path, typed, nearest):
    done = acp(tmp_path, "--agent", typed)

    assert done.returncode == 2
    assert f"unknown agent {typed!r} (did you mean {nearest!r}?); known agents: " in done.stderr
    assert done.stdout == ""


def test_an_unknown_agent_like_no_known_one_suggests_nothing(tmp_path):
    done = acp(tmp_path, "--agent", "zzzzzz")

    assert done.returncode == 2
    assert "unknown agent 'zzzzzz'; known agents: " in done.stderr


# --- the config file ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["prompt", "hello"], ["doctor"]])
def test_acp_server_config_naming_a_missing_file_stops_with_one_line_and_exit_status_2(tmp_path, command):
    missing = tmp_path / "no-such-config.toml"
    done = acp(tmp_path, *command, "--agent", "echo", ACP_SERVER_CONFIG=str(missing))

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"acp-server: ACP_SERVER_CONFIG names the config file {missing}, which does not exist; "
        "create it, or unset ACP_SERVER_CONFIG\n"
    )


def test_acp_server_config_naming_a_file_that_exists_is_used(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[openai]\nmodel = "from-the-file"\n', encoding="utf-8")
    done = acp(tmp_path, "doctor", "--agent", "openai", ACP_SERVER_CONFIG=str(config))

    row = next(line for line in done.stdout.splitlines() if "openai: model" in line)
    assert row.split()[2:4] == ["from-the-file", "file"], done.stdout


def special_config(tmp_path: Path, kind: str) -> Path:
    """A config file that is not one to read: a device, a FIFO, a directory, a huge file, a file
    others may write, another user's file."""
    if kind == "device":
        return Path("/dev/zero")
    path = tmp_path / f"{kind}.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        path.write_bytes(b"#" * (2 << 20))
    else:
        path.write_text('[openai]\nmodel = "m"\n', encoding="utf-8")
        os.chmod(path, 0o664 if kind == "group-writable" else 0o646)
    return path


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("device", "is a character device, not a regular file; point ACP_SERVER_CONFIG at a TOML file"),
        ("fifo", "is a FIFO, not a regular file; point ACP_SERVER_CONFIG at a TOML file"),
        ("directory", "is a directory, not a regular file; point ACP_SERVER_CONFIG at a TOML file"),
        ("huge", "is larger than a config file may be (1024 KiB); check what ACP_SERVER_CONFIG names"),
        (
            "group-writable",
            "is writable by others (mode 0664); run chmod go-w on it",
        ),
        (
            "world-writable",
            "is writable by others (mode 0646); run chmod go-w on it",
        ),
    ],
)
@pytest.mark.parametrize("agent", ["echo", "openai"])
def test_a_config_file_that_is_no_regular_file_of_sane_size_and_safe_mode_stops_with_one_line(
    tmp_path, kind, said, agent
):
    config = special_config(tmp_path, kind)
    done = acp(tmp_path, "--agent", agent, ACP_SERVER_CONFIG=str(config))

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"acp-server: the config file {config} {said}\n"


def test_a_config_file_of_another_user_in_the_default_place_stops_with_one_line(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    config = tmp_path / "config" / "acp-server" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[openai]\nmodel = "m"\n', encoding="utf-8")
    os.chown(config, 65534, 65534)
    done = acp(tmp_path, "prompt", "--agent", "echo", "hello")

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"acp-server: the config file {config} belongs to another user (uid 65534); use a config file of your own\n"
    )
