"""The permission policy as a table: every mode against every tool kind, and "always" answers
that cover exactly what their question named."""

from __future__ import annotations

import pytest

from acp_server.turns.permission import permission_options
from acp_server.turns.policy import MODE_IDS, classify, decide, refuse_in_read_only, subject_of
from adapters.base import ToolRefused
from adapters.events import ToolCallStarted

KINDS = ["read", "search", "think", "edit", "move", "delete", "execute", "fetch", "switch_mode", "other"]
EXPECTED = {
    "ask": ["allow", "allow", "allow", "ask", "ask", "ask", "ask", "ask", "ask", "ask"],
    "accept-edits": ["allow", "allow", "allow", "allow", "allow", "ask", "ask", "ask", "ask", "ask"],
    "read-only": ["allow", "allow", "allow", "deny", "deny", "deny", "deny", "ask", "ask", "ask"],
    "yolo": ["allow"] * 10,
}


def tool(kind: str, name: str | None = None, command: str | None = None) -> ToolCallStarted:
    return ToolCallStarted("call_1", f"{kind} tool", kind, name, {"command": command} if command else None)


@pytest.mark.parametrize("mode", EXPECTED)
def test_each_mode_decides_each_kind_as_documented(mode):
    assert [decide(mode, tool(kind), {}) for kind in KINDS] == EXPECTED[mode]


def always(tool: ToolCallStarted, allowed: bool = True) -> dict[str, bool]:
    """What the answer "always allow" (or "always reject") to a question about `tool` remembers."""
    subject = subject_of(tool)
    return dict.fromkeys(subject.allow if allowed else subject.reject, allowed)


def run(command: str) -> ToolCallStarted:
    return tool("execute", "run_command", command)


def test_remembered_answers_come_before_the_mode_but_read_only_still_refuses_changes():
    edit = tool("edit", "write_file")
    assert decide("ask", edit, always(edit)) == "allow"
    assert decide("yolo", edit, always(edit, False)) == "deny"
    assert decide("read-only", edit, always(edit)) == "deny"


def test_an_always_allowed_command_covers_that_command_as_the_shell_reads_it_and_nothing_more():
    remembered = always(run("git status"))
    assert remembered == {"command:git status": True}
    for same in ("git status", "git  'status'", "  git status\n"):
        assert decide("ask", run(same), remembered) == "allow", same
    for other in ("git push", "git status --short", "git", "FOO=1 git status", "./git status", "/usr/bin/git status"):
        assert decide("ask", run(other), remembered) == "ask", other


def test_always_allowing_a_list_of_commands_covers_each_of_them_and_the_option_says_so():
    line = run("git status && git log | head -5")
    assert subject_of(line).allow_label == "Always allow `git status`, `git log` and `head -5`"
    remembered = always(line)
    assert decide("ask", run("head -5; git log"), remembered) == "allow"
    assert decide("ask", run("git log | head -5 && rm -rf build"), remembered) == "ask"


def test_always_rejecting_a_command_rejects_every_line_that_runs_it():
    remembered = always(run("rm -rf build"), False)
    assert decide("yolo", run("ls && rm -rf  build"), remembered) == "deny"
    assert decide("yolo", run("rm -rf build2"), remembered) == "allow"


def test_always_rejecting_a_list_rejects_exactly_that_line_not_each_of_its_commands():
    line = run("git status && rm -rf build")
    remembered = always(line, False)
    assert subject_of(line).reject_label == "Always reject exactly `git status && rm -rf build`"
    assert decide("yolo", run("git status && rm -rf build"), remembered) == "deny"
    assert decide("yolo", run("git status"), remembered) == "allow"


def test_a_line_the_shell_could_make_do_more_is_offered_no_always_allow_and_no_rule_covers_it():
    line = run("git log $(touch x)")
    assert [o["kind"] for o in permission_options(subject_of(line))] == ["allow_once", "reject_once", "reject_always"]
    everything = {"command:git log": True, "command:touch x": True, "command line:git log $(touch x)": True}
    assert decide("ask", line, everything) == "ask"
    assert decide("yolo", line, {}) == "allow"
    assert decide("yolo", line, always(line, False)) == "deny"


def test_answers_older_versions_kept_for_a_program_allow_no_command():
    assert decide("ask", run("git push --force"), {"execute:git": True}) == "ask"


def test_each_option_is_named_by_what_it_covers():
    names = {o["kind"]: o["name"] for o in permission_options(subject_of(run("GIT_DIR=x git status")))}
    assert names == {
        "allow_once": "Allow once",
        "allow_always": "Always allow `GIT_DIR=x git status`",
        "reject_once": "Reject",
        "reject_always": "Always reject `GIT_DIR=x git status`",
    }
    assert subject_of(tool("edit", "write_file")).allow_label == "Always allow `write_file` (any input)"


def test_an_execute_call_that_names_no_command_cannot_be_always_allowed():
    untold = ToolCallStarted("call_1", "Run tests", "execute", None, {"script": "anything"})
    assert subject_of(untold).allow == ()
    assert [o["kind"] for o in permission_options(subject_of(untold))] == ["allow_once", "reject_once", "reject_always"]
    # An answer an older version kept for the title covers no later call under it either.
    later = ToolCallStarted("call_2", "Run tests", "execute", None, {"script": "rm -rf ~"})
    assert decide("ask", later, {"execute:Run tests": True}) == "ask"
    assert decide("ask", later, always(untold, False)) == "deny"


def test_a_command_given_a_working_directory_is_asked_about_with_it():
    terminal = ToolCallStarted("call_1", "Run make", "execute", "terminal", {"command": "make", "workdir": "/w"})
    assert subject_of(terminal).allow_label == "Always allow `cd /w` and `make`"
    assert decide("ask", terminal, always(run("make"))) == "ask"


MCP_NAMES = [
    "mcp__srv__get_weather",
    "mcp__github__get_file_contents",
    "mcp__find__anything",
    "mcp__cat__rm_everything",
]


@pytest.mark.parametrize("declared", ["read", "search", "other", None])
@pytest.mark.parametrize("name", MCP_NAMES)
def test_an_mcp_tool_asks_whatever_its_name_or_declared_kind_says(name, declared):
    assert classify(name, declared) == "other"
    assert decide("ask", tool(declared or "other", name), {}) == "ask"


def test_always_allowing_one_mcp_tool_does_not_cover_another():
    weather = tool("other", "mcp__srv__get_weather")
    remembered = always(weather)
    assert decide("ask", weather, remembered) == "allow"
    assert decide("ask", tool("other", "mcp__srv__get_forecast"), remembered) == "ask"
    assert decide("ask", tool("other", "mcp__other__get_weather"), remembered) == "ask"


@pytest.mark.parametrize(
    ("name", "declared", "kind"),
    [
        ("read_file", None, "read"),
        ("grep_search", "other", "search"),
        ("run_terminal_cmd", None, "execute"),
        ("apply_patch", None, "edit"),
        ("delete_file", None, "delete"),
        ("web-fetch", None, "fetch"),
        ("mystery", None, "other"),
        ("anything", "edit", "edit"),
        (None, "bogus", "other"),
    ],
)
def test_tools_are_classified_from_their_declared_kind_or_their_name(name, declared, kind):
    assert classify(name, declared) == kind


def test_only_read_only_mode_refuses_writes_and_commands_before_anything_runs():
    with pytest.raises(ToolRefused, match="not allowed in read-only mode"):
        refuse_in_read_only("read-only", "running commands")
    for mode in MODE_IDS - {"read-only"}:
        refuse_in_read_only(mode, "running commands")
