"""What a shell command line runs, as far as its text alone tells: for permission rules.

`simple_commands` splits a line made only of simple commands joined by `;`, `&&`, `||`, `|`,
`|&`, `&` and newlines into those commands, each in one canonical spelling: its words as the
shell reads them (quotes and backslashes resolved), quoted again by `shlex.quote`, with globs,
braces and `~` left unquoted since the shell expands them. So `git  "status"` is `git status`,
while `./git status`, `GIT_DIR=x git status` and `git status 2>&1` are other commands. A line
that could do more than its words say is opaque (None): `$` expansions and substitutions,
backticks, redirections other than `N>&M` and to `/dev/null`, subshells and `{ }` groups,
here-documents, process substitution, comments, reserved words (`if`, `for`, `!`, ...), an
unclosed quote. The grammar is POSIX sh's, which bash and dash share.

`command_of` is the command line a tool call's input names, as agents both show and run it: a
string, or an argument list (Codex's `["/bin/bash", "-lc", LINE]` is LINE; any other list is its
words quoted for the shell).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any, Literal, cast

_Kind = Literal["plain", "quoted", "glob"]
_QUOTED: _Kind = "quoted"

_BLANKS = " \t"
_SEPARATORS = ";&|\n"
_OPAQUE = "$`()"  # expansions, substitutions, subshells: outside quotes, nothing is matched
_GLOBS = "*?[]{}~!"  # left unquoted in the canonical spelling: the shell expands them
_RESERVED = frozenset(
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while".split()  # noqa: SIM905
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DELIMITED = r"(?=[ \t;&|\n]|$)"
# The redirections that neither read nor write a file: duplicating or closing a descriptor,
# and /dev/null. Anything else (a file, `<<`, `<(`, `>(`, `<>`) makes the line opaque.
_HARMLESS_REDIRECTION = re.compile(rf"(?:[<>]&(?:\d+|-)|(?:<|>>?|>\|)[ \t]*/dev/null){_DELIMITED}")


@dataclass(slots=True)
class _Word:
    chars: list[tuple[str, _Kind]] = field(default_factory=list[tuple[str, _Kind]])

    def text(self) -> str:
        return "".join(char for char, _ in self.chars)

    def unquoted(self, text: str) -> bool:
        """Whether the word is `text` with no quote or backslash in it (as reserved words are)."""
        return self.text() == text and all(kind != "quoted" for _, kind in self.chars)

    def assignment(self) -> bool:
        """`NAME=value`, the name and `=` unquoted: the shell sets a variable instead."""
        text = self.text()
        name, equals, _ = text.partition("=")
        plain = all(kind == "plain" for _, kind in self.chars[: len(name) + 1])
        return bool(equals) and _NAME.fullmatch(name) is not None and plain

    def canonical(self) -> str:
        """The word as `shlex.quote` spells its text; with globs, braces or `~` in it, which
        expand only unquoted (and a quoted neighbour can stop that: `~'/x'`, `{a','b}`), each
        run of quoted characters stays quoted and the rest stays as written."""
        if all(kind != "glob" for _, kind in self.chars):
            return shlex.quote(self.text())
        runs = ((kind, "".join(char for char, _ in run)) for kind, run in groupby(self.chars, key=itemgetter(1)))
        return "".join("'" + text.replace("'", "'\"'\"'") + "'" if kind == "quoted" else text for kind, text in runs)


_Item = _Word | str  # a word, or a harmless redirection in its canonical spelling


class _Opaque(Exception):
    """The line does something its words do not show."""


def simple_commands(line: str) -> tuple[str, ...] | None:
    """The line's simple commands in canonical spelling, in order; None when it is opaque."""
    try:
        commands = _Lexer(line).commands()
    except _Opaque:
        return None
    return tuple(commands) or None


def command_of(raw_input: Any) -> str | None:
    """The command line a tool call's input names: the input itself when it is a string, else
    its `command`, run in its `workdir` (`cd DIR && command`) when it names one; None for none."""
    fields = cast(dict[str, Any], raw_input) if isinstance(raw_input, dict) else {"command": raw_input}
    command, workdir = fields.get("command"), fields.get("workdir")
    if isinstance(command, list):
        command = _line_of(cast(list[Any], command))
    if not isinstance(command, str) or not command.strip():
        return None
    return f"cd {shlex.quote(workdir)} && {command}" if isinstance(workdir, str) and workdir else command


_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
_SCRIPT_FLAGS = frozenset({"-c", "-lc", "-cl"})


def _line_of(argv: list[Any]) -> str | None:
    """The line an argument list runs: a shell's `-c` script as it is, else the words quoted."""
    if not argv or not all(isinstance(word, str) for word in argv):
        return None
    words = cast(list[str], argv)
    if not words[0].strip():
        return None
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in _SCRIPT_FLAGS:
        return words[2]
    return shlex.join(words)


class _Lexer:
    """One pass over a line: words, separators and the few harmless redirections."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.at = 0
        self.items: list[_Item] = []
        self.word: _Word | None = None
        self.done: list[str] = []

    def commands(self) -> list[str]:
        line = self.line
        while self.at < len(line):
            char = line[self.at]
            if char in _BLANKS:
                self.end_word()
                self.at += 1
            elif char == "&" and line.startswith(">", self.at + 1):
                self.redirect("&", self.at + 1)
            elif char in _SEPARATORS:
                self.separator()
            elif char in "<>":
                self.redirect_here()
            elif char in _OPAQUE or (char == "#" and self.word is None):
                raise _Opaque
            elif char == "'":
                self.single_quoted()
            elif char == '"':
                self.double_quoted()
            elif char == "\\":
                self.escaped()
            else:
                self.add(char, "glob" if char in _GLOBS else "plain")
                self.at += 1
        self.end_command()
        return self.done

    def add(self, char: str, kind: _Kind) -> None:
        if self.word is None:
            self.word = _Word()
        self.word.chars.append((char, kind))

    def end_word(self) -> None:
        if self.word is not None:
            self.items.append(self.word)
            self.word = None

    def end_command(self) -> None:
        self.end_word()
        if self.items:
            self.done.append(_canonical(self.items))
            self.items = []

    def separator(self) -> None:
        pair = self.line[self.at : self.at + 2]
        if pair in (";;", ";&"):
            raise _Opaque  # `case` syntax
        self.end_command()
        self.at += 2 if pair in ("&&", "||", "|&") else 1

    def single_quoted(self) -> None:
        end = self.line.find("'", self.at + 1)
        if end < 0:
            raise _Opaque
        self.add_quoted(self.line[self.at + 1 : end])
        self.at = end + 1

    def double_quoted(self) -> None:
        line, at = self.line, self.at + 1
        self.add_quoted("")  # `""` is a word too
        while at < len(line) and line[at] != '"':
            char = line[at]
            if char in "$`":
                raise _Opaque
            if char == "\\" and line[at + 1 : at + 2] in ("$", "`", '"', "\\", "\n"):
                self.add_quoted("" if line[at + 1] == "\n" else line[at + 1])
                at += 2
            else:
                self.add_quoted(char)
                at += 1
        if at >= len(line):
            raise _Opaque
        self.at = at + 1

    def escaped(self) -> None:
        following = self.line[self.at + 1 : self.at + 2]
        if not following:
            raise _Opaque
        if following != "\n":  # a line continuation joins the lines
            self.add_quoted(following)
        self.at += 2

    def add_quoted(self, text: str) -> None:
        if self.word is None:
            self.word = _Word()
        self.word.chars.extend((char, _QUOTED) for char in text)

    def redirect_here(self) -> None:
        """A redirection at `<` or `>`: its descriptor is the word before it when that is all
        digits (`2>&1`); any other word touching it ends there."""
        descriptor = ""
        if self.word is not None:
            text = self.word.text()
            if text.isdigit() and self.word.unquoted(text):
                descriptor, self.word = text, None
            elif any(kind == "glob" for _, kind in self.word.chars):
                raise _Opaque  # `{fd}>&1` names a variable to set
        self.redirect(descriptor, self.at)

    def redirect(self, descriptor: str, operator: int) -> None:
        self.end_word()
        found = _HARMLESS_REDIRECTION.match(self.line, operator)
        if found is None:
            raise _Opaque
        self.items.append(descriptor + re.sub(r"[ \t]+", "", found.group()))
        self.at = found.end()


def _canonical(items: list[_Item]) -> str:
    """One simple command's spelling: leading assignments as `NAME=value`, then the program
    and its arguments, redirections where they stand."""
    spelled: list[str] = []
    program: _Word | None = None
    for item in items:
        if isinstance(item, str):
            spelled.append(item)
        elif program is None and item.assignment():
            name = item.text().partition("=")[0]
            spelled.append(f"{name}={_Word(item.chars[len(name) + 1 :]).canonical()}")
        else:
            program = program or _program(item)
            spelled.append(item.canonical())
    return " ".join(spelled)


def _program(word: _Word) -> _Word:
    if any(word.unquoted(reserved) for reserved in _RESERVED):
        raise _Opaque
    if "=" in word.text() and _NAME.fullmatch(word.text().partition("=")[0]):
        raise _Opaque  # `'A=b' cmd` runs a program named A=b, but reads like an assignment
    return word
