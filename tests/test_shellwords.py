"""The shell command analyser: command lines -> their simple commands, or opaque (None)."""

from __future__ import annotations

import pytest

from adapters.shellwords import command_of, simple_commands


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("git status", ("git status",)),
        ("  git   'status'  ", ("git status",)),
        ('g"it" st\\atus', ("git status",)),
        ("git status; touch x", ("git status", "touch x")),
        ("git status && rm -rf dir", ("git status", "rm -rf dir")),
        ("a || b | c |& d & e\nf;", ("a", "b", "c", "d", "e", "f")),
        ("GIT_DIR=x git status ; rm -rf dir", ("GIT_DIR=x git status", "rm -rf dir")),
        ("A='b c' d X=\"y z\"", ("A='b c' d 'X=y z'",)),
        ("./git", ("./git",)),
        ("/some/dir/git status", ("/some/dir/git status",)),
        ("git --version && touch pwned", ("git --version", "touch pwned")),
        ("echo 'a;b' \"c&&d\" e\\;f", ("echo 'a;b' 'c&&d' 'e;f'",)),
        ("echo '$(x)' \"\\$HOME\"", ("echo '$(x)' '$HOME'",)),
        ("echo ''", ("echo ''",)),
        ("git log \\\n  --oneline", ("git log --oneline",)),
        ("make 2>&1", ("make 2>&1",)),
        ("make 2 >&1", ("make 2 >&1",)),
        ("make >/dev/null 2> /dev/null", ("make >/dev/null 2>/dev/null",)),
        ("make &>/dev/null </dev/null", ("make &>/dev/null </dev/null",)),
        ("echo a#b", ("echo 'a#b'",)),
        # Globs, braces and ~ stay unquoted, so they never match their quoted selves.
        ("ls *.py", ("ls *.py",)),
        ("ls '*.py'", ("ls '*.py'",)),
        ("ls ~/x ~'/x'", ("ls ~/x ~'/x'",)),
        ("echo {a,b} {a','b}", ("echo {a,b} {a','b}",)),
        ('"if" x', ("if x",)),
    ],
)
def test_a_line_of_simple_commands_splits_into_them_in_canonical_spelling(line, commands):
    assert simple_commands(line) == commands


@pytest.mark.parametrize(
    "line",
    [
        "git log $(touch x)",
        "git log `touch x`",
        'git log "$(touch x)"',
        "echo $HOME",
        "echo ${HOME}",
        '"$GIT" status',
        "$GIT status",
        "echo $((1+2))",
        "diff <(ls a) b",
        "tee >(cat)",
        "git status > out",
        "git status >> out",
        "sort < in",
        "cat <<EOF\nx\nEOF",
        "cat <<< word",
        "make >&out",
        "make 2>/dev/nullx",
        "(rm -rf x)",
        "{ rm -rf x; }",
        "git() { rm -rf x; }; git status",
        "if true; then rm x; fi",
        "for f in a; do rm $f; done",
        "! rm x",
        "[[ -f x ]]",
        "time rm x",
        "git status # ; rm -rf x",
        "# rm -rf x",
        "'A=b' cmd",
        "case x in x) rm x;; esac",
        "echo 'unclosed",
        'echo "unclosed',
        "echo trailing\\",
        "cmd {fd}>&1",
        "",
        " ; ",
    ],
)
def test_a_line_that_could_do_more_than_its_words_say_is_opaque(line):
    assert simple_commands(line) is None


def test_an_argument_list_is_the_line_it_runs():
    assert command_of({"command": ["/bin/bash", "-lc", "git status && rm -rf x"]}) == "git status && rm -rf x"
    assert simple_commands(command_of({"command": ["bash", "-c", "git status; touch x"]}) or "") == (
        "git status",
        "touch x",
    )
    assert command_of({"command": ["git", "commit", "-m", "a b"]}) == "git commit -m 'a b'"
    assert command_of({"command": ["/bin/bash", "-lc", "ls", "extra"]}) == "/bin/bash -lc ls extra"
    assert command_of({"command": ["git", 1]}) is None
    assert command_of({"command": []}) is None


def test_the_command_of_a_call_is_its_command_run_in_its_workdir():
    assert command_of({"command": "git status"}) == "git status"
    assert command_of("ls -l") == "ls -l"
    assert command_of({"command": "make", "workdir": "/a b"}) == "cd '/a b' && make"
    assert simple_commands(command_of({"command": "make", "workdir": "/a b"}) or "") == ("cd '/a b'", "make")
    for nothing in ({"command": "  "}, {"command": [""]}, {"path": "x"}, None, 3):
        assert command_of(nothing) is None
