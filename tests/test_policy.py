"""The permission policy as a table: every mode against every tool kind, and "always" answers."""

from __future__ import annotations

import pytest

from acp_server.turns.policy import MODE_IDS, always_key, classify, decide, program_of, refuse_in_read_only
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


def test_remembered_answers_come_before_the_mode_but_read_only_still_refuses_changes():
    edit = tool("edit", "write_file")
    assert decide("ask", edit, {always_key(edit): True}) == "allow"
    assert decide("yolo", edit, {always_key(edit): False}) == "deny"
    assert decide("read-only", edit, {always_key(edit): True}) == "deny"


def test_always_answers_for_commands_are_scoped_to_the_program():
    commands = ("git status", "FOO=1 /usr/bin/git push", "rm -rf /")
    git_status, git_push, rm = (tool("execute", "run", c) for c in commands)
    assert always_key(git_status) == always_key(git_push) == "execute:git"
    remembered = {always_key(git_status): True}
    assert decide("ask", git_push, remembered) == "allow"
    assert decide("ask", rm, remembered) == "ask"


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


def test_the_program_of_a_command_skips_assignments_and_paths():
    assert program_of({"command": "LANG=C /bin/ls -l"}) == "ls"
    assert program_of("echo 'unbalanced") == "echo"
    assert program_of({"command": "  "}) is None


def test_only_read_only_mode_refuses_writes_and_commands_before_anything_runs():
    with pytest.raises(ToolRefused, match="not allowed in read-only mode"):
        refuse_in_read_only("read-only", "running commands")
    for mode in MODE_IDS - {"read-only"}:
        refuse_in_read_only(mode, "running commands")
