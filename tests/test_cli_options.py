"""Server options before or after a subcommand, and from the environment: a flag after the
command beats one before it, which beats ACP_SERVER_*, which beats the default. Each command
runs as a real subprocess over real journal files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def acp(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ACP_SERVER_")}
    environ["XDG_DATA_HOME"] = str(cwd / "default-data")  # the default journal: empty, ours alone
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**environ, **env},
    )


@pytest.fixture(scope="module")
def made_journals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Made once (four commands): a journal holding one echo session, an empty one, and the ids
    of that session's run."""
    here = tmp_path_factory.mktemp("journals")
    full, empty = str(here / "full.db"), str(here / "empty.db")
    made = acp("--db", full, "prompt", "--agent", "echo", "remember me", cwd=here)
    assert made.returncode == 0, made.stderr
    made = acp("--db", empty, "sessions", cwd=here)  # creates the empty journal file
    assert made.returncode == 0, made.stderr
    document = json.loads(acp("export", exported_session(full, here), "--db", full, cwd=here).stdout)
    return here, {"session": document["session"]["id"], "run": document["runs"][0]["id"]}


@pytest.fixture
def journals(made_journals: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[str, str, dict[str, str]]:
    """The made journals, copied into the test's own directory."""
    here, ids = made_journals
    for made in here.glob("*.db*"):
        shutil.copy2(made, tmp_path / made.name)
    return str(tmp_path / "full.db"), str(tmp_path / "empty.db"), ids


def exported_session(db: str, cwd: Path) -> str:
    listed = acp("sessions", "--json", "--db", db, cwd=cwd)
    (session,) = [json.loads(line) for line in listed.stdout.splitlines()]
    return session["sessionId"]


COMMANDS = {
    "sessions": lambda ids: ["sessions"],
    "show": lambda ids: ["show", ids["session"]],
    "runs": lambda ids: ["runs", ids["session"]],
    "events": lambda ids: ["events", ids["run"]],
    "export": lambda ids: ["export", ids["session"]],
}


def found(done: subprocess.CompletedProcess[str], ids: dict[str, str]) -> bool:
    """Whether the command read the journal holding the session: on the empty one each command
    fails with "no session/run ... in this journal", or (`sessions`) lists nothing."""
    return done.returncode == 0 and any(word in done.stdout for word in (ids["session"], ids["run"], "remember me"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_journal_command_reads_the_db_given_before_after_or_in_the_environment(command, journals, tmp_path):
    full, empty, ids = journals
    words = COMMANDS[command](ids)
    before = acp("--db", full, *words, cwd=tmp_path, ACP_SERVER_DB=empty)
    assert found(before, ids), f"--db before {command} (beats the environment): {before.stdout}{before.stderr}"
    after = acp("--db", empty, *words, "--db", full, cwd=tmp_path, ACP_SERVER_DB=empty)
    assert found(after, ids), f"--db after {command} (beats the one before): {after.stdout}{after.stderr}"
    from_env = acp(*words, cwd=tmp_path, ACP_SERVER_DB=full)
    assert found(from_env, ids), f"ACP_SERVER_DB with {command}: {from_env.stdout}{from_env.stderr}"
    default = acp(*words, cwd=tmp_path)
    assert not found(default, ids), f"{command} without --db reads the default journal, which is empty"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_server_option_is_accepted_after_a_journal_command(command, journals, tmp_path):
    full, _empty, ids = journals
    words = COMMANDS[command](ids)
    done = acp(*words, "--db", full, "--log-level", "ERROR", "--agent", "echo", "--max-workers", "2", cwd=tmp_path)
    assert found(done, ids), done.stderr


def test_prompt_writes_to_the_db_given_after_it_over_the_one_before_and_the_environment(tmp_path):
    first, second, third = (str(tmp_path / f"{name}.db") for name in ("first", "second", "third"))
    done = acp("--db", first, "prompt", "--agent", "echo", "hello", "--db", second, cwd=tmp_path, ACP_SERVER_DB=third)
    assert done.returncode == 0, done.stderr
    assert [bool(acp("sessions", "--db", db, cwd=tmp_path).stdout.strip()) for db in (first, second, third)] == [
        False,
        True,
        False,
    ]


def test_doctor_shows_the_db_flag_given_before_it_and_after_it(tmp_path):
    first, second = str(tmp_path / "first.db"), str(tmp_path / "second.db")
    before = acp("--db", first, "doctor", "--agent", "echo", cwd=tmp_path, ACP_SERVER_DB=second)
    after = acp("--db", first, "doctor", "--agent", "echo", "--db", second, cwd=tmp_path)
    assert _db_row(before.stdout) == [first, "flag", "--db"]
    assert _db_row(after.stdout) == [second, "flag", "--db"]


def _db_row(output: str) -> list[str]:
    row = next(line for line in output.splitlines() if line.split()[:1] == ["db"])
    return row.split()[1:]


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_base_url_points_the_openai_agent_at_an_endpoint_over_openai_base_url(tmp_path, how):
    from fake_openai import FakeOpenAI, reply

    with FakeOpenAI(models=["fake-model"]) as fake:
        fake.script(reply("Hello from the endpoint."))
        given = ["--base-url", fake.base_url] if how == "flag" else []
        done = acp(
            "prompt",
            "--agent",
            "openai",
            *given,
            "hello",
            cwd=tmp_path,
            XDG_CONFIG_HOME=str(tmp_path / "config"),
            OPENAI_API_KEY="sk-test-not-a-real-key-000000",
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",  # loses: nothing listens there
            **({"ACP_SERVER_BASE_URL": fake.base_url} if how == "environment" else {}),
        )
        assert (done.returncode, done.stdout) == (0, "Hello from the endpoint.\n"), done.stderr
        assert [chat["model"] for chat in fake.chats] == ["fake-model"]


def test_every_server_option_and_its_variable_are_in_the_docs_option_table():
    from acp_server.cli.settings import SERVER_OPTIONS, env_name

    page = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("## Server options", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    rows = {line.split("`")[1].split()[0]: line for line in table}
    assert sorted(rows) == sorted(flag for flag, _spec in SERVER_OPTIONS)
    for flag, _spec in SERVER_OPTIONS:
        assert f"| `{env_name(flag)}` |" in rows[flag], rows[flag]


@pytest.mark.parametrize(
    ("argv", "runner", "text"),
    [
        (["prompt", "--runner", "hi via runner"], "1", "hi via runner"),
        (["--runner", "prompt", "hi"], "1", "hi"),
        (["prompt", "hi", "--runner"], "1", "hi"),
        (["prompt", "--runner", "0", "hi"], "0", "hi"),
        (["prompt", "--runner", "ON", "hi"], "1", "hi"),
        (["prompt", "--runner=off", "hi"], "0", "hi"),
    ],
)
def test_runner_takes_a_value_only_when_one_is_given_and_never_swallows_the_prompt(argv, runner, text):
    from acp_server.cli.main import build_parser
    from acp_server.cli.settings import bare_switches

    args = build_parser().parse_args(bare_switches(argv))
    assert (args.command, args.runner, args.text) == ("prompt", runner, text)


def test_a_runner_value_that_is_no_switch_is_an_error_not_a_quiet_off(tmp_path):
    env = {**os.environ, "ACP_SERVER_RUNNER": "banana"}
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--agent", "echo", "prompt", "x"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--runner: expected 1 or 0" in done.stderr and "'banana'" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--agent", "echo"],
        ["--agent=claude", "--log-level", "debug", "--runner"],
        ["--runner", "off", "--max-workers", "3", "--haui", "off"],
        ["--age", "echo"],  # an abbreviation
        ["--agent", "prompt"],  # an option's value that is also a command's name
        ["prompt", "--agent", "echo", "hi"],
        ["--agent", "echo", "sessions", "--json"],
        ["--agent", "echo", "--", "npx", "agent"],
    ],
)
def test_an_editors_launch_is_read_as_the_whole_parser_reads_it(argv):
    """Options alone are read without the commands' parsers (start-up speed); what is read is the same."""
    from acp_server.cli.main import build_parser, parse_arguments
    from acp_server.cli.settings import bare_switches, split_agent_command

    words = bare_switches(split_agent_command(argv)[0])
    args, _parser = parse_arguments(words)
    assert vars(args) == vars(build_parser().parse_args(words))


@pytest.mark.parametrize(
    "argv", [["--help"], ["--he"], ["-h"], ["--agent", "echo", "--bogus"], ["bogus"], ["--max-workers", "x"]]
)
def test_help_and_usage_errors_come_from_the_whole_parser(argv, capsys):
    from acp_server.cli.main import build_parser, parse_arguments

    with pytest.raises(SystemExit) as ours:
        parse_arguments(argv)
    said = capsys.readouterr()
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_args(argv)
    assert (ours.value.code, said) == (whole.value.code, capsys.readouterr())
    if ours.value.code == 0:
        assert "COMMAND" in said.out and "sessions" in said.out  # the commands are in the help
