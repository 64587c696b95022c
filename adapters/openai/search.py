"""Local, read-only views of the workspace: listing a directory and searching text.

Both run in the worker thread, confined to the session's cwd (a path escaping it through
`..`, a symlink or an absolute path is refused), skip `.git`, and honour `.gitignore` files
(with `pathspec` when installed, else a small glob subset). Results are capped.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from adapters.base import ToolRefused
from adapters.paths import confine

MAX_ENTRIES = 1000
MAX_MATCHES = 200
MAX_FILES = 20_000
MAX_FILE_BYTES = 1 << 20
MAX_LINE_CHARS = 240

Matcher = Callable[[str], bool]


def list_directory(cwd: str, path: str = ".") -> str:
    """One entry per line, directories first and marked with a trailing slash."""
    real = confine(path, cwd=cwd)
    try:
        with os.scandir(real) as it:
            entries = [(not e.is_dir(), e.name + ("/" if e.is_dir() else "")) for e in it]
    except FileNotFoundError:
        raise ToolRefused(f"No such directory: {path}") from None
    except NotADirectoryError:
        raise ToolRefused(f"{path} is a file, not a directory") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot list {path}: {exc.strerror}") from None
    names = [name for _, name in sorted(entries)]
    if not names:
        return "(empty directory)"
    more = f"\n[{len(names) - MAX_ENTRIES} more entries not shown]" if len(names) > MAX_ENTRIES else ""
    return "\n".join(names[:MAX_ENTRIES]) + more


@dataclass(frozen=True, slots=True)
class SearchResult:
    text: str
    matches: int
    truncated: bool


def search_text(
    cwd: str,
    pattern: str,
    path: str = ".",
    *,
    check: Callable[[], None] = lambda: None,
) -> SearchResult:
    """Lines matching the regular expression (or literal text when it is not one)."""
    start = confine(path, cwd=cwd)
    root = os.path.realpath(cwd)
    note = ""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        regex, note = re.compile(re.escape(pattern)), f"[not a valid regular expression ({exc}); searched as text]\n"
    found: list[str] = []
    for count, file in enumerate(_files(root, start)):
        if count % 200 == 0:
            check()
        if count >= MAX_FILES or len(found) >= MAX_MATCHES:
            break
        found.extend(_matches(file, os.path.relpath(file, root), regex, MAX_MATCHES - len(found)))
    truncated = len(found) >= MAX_MATCHES
    body = "\n".join(found) if found else "No matches."
    tail = f"\n[stopped after {MAX_MATCHES} matches; narrow the pattern or the path]" if truncated else ""
    return SearchResult(note + body + tail, len(found), truncated)


def _matches(file: str, shown: str, regex: re.Pattern[str], room: int) -> list[str]:
    try:
        if os.path.getsize(file) > MAX_FILE_BYTES:
            return []
        with open(file, "rb") as f:
            data = f.read()
    except OSError:
        return []
    if b"\0" in data[:8192]:
        return []
    out: list[str] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            out.append(f"{shown}:{number}: {line.strip()[:MAX_LINE_CHARS]}")
            if len(out) >= room:
                break
    return out


def _files(root: str, start: str) -> Iterator[str]:
    """Every file under `start`, in a stable order, minus `.git` and ignored paths."""
    if os.path.isfile(start):
        yield start
        return
    rules = _ancestor_rules(root, start)
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        if dirpath != start and (spec := _load_rules(dirpath)) is not None:
            rules.append((rel_dir, spec))
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and not _ignored(rules, rel_dir + d + "/"))
        for name in sorted(filenames):
            if not _ignored(rules, rel_dir + name):
                yield os.path.join(dirpath, name)


def _ancestor_rules(root: str, start: str) -> list[tuple[str, Matcher]]:
    rules: list[tuple[str, Matcher]] = []
    current = root
    parts = [] if start == root else os.path.relpath(start, root).split(os.sep)
    for index in range(len(parts) + 1):
        if (spec := _load_rules(current)) is not None:
            rules.append(("/".join(parts[:index]) + "/" if index else "", spec))
        if index < len(parts):
            current = os.path.join(current, parts[index])
    return rules


def _ignored(rules: list[tuple[str, Matcher]], rel: str) -> bool:
    return any(rel.startswith(base) and spec(rel[len(base) :]) for base, spec in rules)


def _load_rules(directory: str) -> Matcher | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    try:
        import pathspec
    except ImportError:
        return _GlobRules(lines).match
    return pathspec.GitIgnoreSpec.from_lines(lines).match_file


class _GlobRules:
    """A subset of gitignore without pathspec: globs, `/` anchoring, `dir/`, `!` negation."""

    def __init__(self, lines: list[str]) -> None:
        self._rules: list[tuple[str, bool, bool, bool]] = []  # glob, negated, anchored, dir only
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line.lstrip("!").removeprefix("**/")
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self._rules.append((line.lstrip("/"), negated, anchored, dir_only))

    def match(self, rel: str) -> bool:
        is_dir = rel.endswith("/")
        path = rel.rstrip("/")
        ignored = False
        for glob, negated, anchored, dir_only in self._rules:
            if dir_only and not is_dir:
                continue
            subject = path if anchored else path.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(subject, glob):
                ignored = not negated
        return ignored
