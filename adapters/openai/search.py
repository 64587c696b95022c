"""Local, read-only views of the workspace: listing a directory and searching text.

Both run in the worker thread, confined to the session's cwd through the one path opener
(`adapters.paths`): a path escaping it through `..`, a symlink or an absolute path is refused.
The search walks by directory descriptors, never into a symlinked directory, and reads a
symlinked file only when it leads to a file inside: one leading out is skipped (and listed as
such). It skips `.git` and honours `.gitignore` files (with `pathspec`
when installed, else a small glob subset). Results are capped.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator

from adapters.base import ToolRefused
from adapters.frozen import frozen
from adapters.paths import READ, Place, opened, target

MAX_ENTRIES = 1000
MAX_MATCHES = 200
MAX_FILES = 20_000
MAX_FILE_BYTES = 1 << 20
MAX_LINE_CHARS = 240

Matcher = Callable[[str], bool]


def list_directory(cwd: str, path: str = ".") -> str:
    """One entry per line, directories first and marked with a trailing slash."""
    try:
        with opened(path, cwd=cwd, flags=os.O_RDONLY | os.O_DIRECTORY) as (fd, _), os.scandir(fd) as it:
            entries = [_listed(entry, os.path.join(path, entry.name), cwd) for entry in it]
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


def _listed(entry: os.DirEntry[str], path: str, cwd: str) -> tuple[bool, str]:
    """(not a directory, the line) for one entry; a symlink's target is looked at only inside."""
    if entry.is_symlink():
        try:
            target(path, cwd=cwd)
        except ToolRefused:
            return True, f"{entry.name} (a symlink to outside the workspace)"
    is_dir = entry.is_dir()
    return not is_dir, entry.name + ("/" if is_dir else "")


@frozen
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
    note = ""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        regex, note = re.compile(re.escape(pattern)), f"[not a valid regular expression ({exc}); searched as text]\n"
    try:
        with opened(path, cwd=cwd) as (fd, place):
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                found = _search_tree(fd, place, regex, check)
            else:
                found = _matches(_small(fd), place.relative, regex, MAX_MATCHES)
    except FileNotFoundError:
        raise ToolRefused(f"No such file or directory: {path}") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot search {path}: {exc.strerror}") from None
    truncated = len(found) >= MAX_MATCHES
    body = "\n".join(found) if found else "No matches."
    tail = f"\n[stopped after {MAX_MATCHES} matches; narrow the pattern or the path]" if truncated else ""
    return SearchResult(note + body + tail, len(found), truncated)


def _search_tree(start_fd: int, place: Place, regex: re.Pattern[str], check: Callable[[], None]) -> list[str]:
    found: list[str] = []
    for count, (dir_fd, name, shown) in enumerate(_files(start_fd, place)):
        if count % 200 == 0:
            check()
        if count >= MAX_FILES or len(found) >= MAX_MATCHES:
            break
        data = _content(dir_fd, name, shown, place.root)
        found.extend(_matches(data, shown, regex, MAX_MATCHES - len(found)))
    return found


def _matches(data: bytes | None, shown: str, regex: re.Pattern[str], room: int) -> list[str]:
    if data is None or b"\0" in data[:8192]:
        return []
    out: list[str] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            out.append(f"{shown}:{number}: {line.strip()[:MAX_LINE_CHARS]}")
            if len(out) >= room:
                break
    return out


def _files(start_fd: int, place: Place) -> Iterator[tuple[int, str, str]]:
    """Every file under the start directory as (its directory's descriptor, its name, its path
    from the root), in a stable order, minus `.git` and ignored paths. Walked by descriptors,
    never into a symlinked directory."""
    rules = _ancestor_rules(place)
    prefix = "" if not place.parts else place.relative + "/"
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=start_fd):
        rel_dir = prefix if dirpath == "." else prefix + dirpath.removeprefix("./") + "/"
        if dirpath != "." and (spec := _rules(_content(dir_fd, ".gitignore", rel_dir + ".gitignore", place.root))):
            rules.append((rel_dir, spec))
        dirnames[:] = sorted(
            d for d in dirnames if d != ".git" and not _ignored(rules, rel_dir + d + "/") and _is_directory(dir_fd, d)
        )
        for name in sorted(filenames):
            if not _ignored(rules, rel_dir + name):
                yield dir_fd, name, rel_dir + name


def _is_directory(dir_fd: int, name: str) -> bool:
    """A directory, not a symlink to one (fwalk would open the target before it noticed)."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _content(dir_fd: int, name: str, shown: str, root: str) -> bytes | None:
    """The bytes of a regular file of at most MAX_FILE_BYTES, else None. A symlink is followed
    only through the opener, so only to a file inside the workspace."""
    try:
        fd = os.open(name, READ | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        return _beneath(shown, root) if exc.errno == errno.ELOOP else None
    try:
        return _small(fd)
    finally:
        os.close(fd)


def _beneath(path: str, root: str) -> bytes | None:
    try:
        with opened(path, cwd=root) as (fd, _):
            return _small(fd)
    except (ToolRefused, OSError):
        return None


def _small(fd: int) -> bytes | None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        return None
    with open(fd, "rb", closefd=False) as f:
        return f.read()


def _ancestor_rules(place: Place) -> list[tuple[str, Matcher]]:
    """The `.gitignore` rules of the root and of every directory down to the start."""
    rules: list[tuple[str, Matcher]] = []
    for index in range(len(place.parts) + 1):
        base = "".join(part + "/" for part in place.parts[:index])
        if (spec := _rules(_beneath(base + ".gitignore", place.root))) is not None:
            rules.append((base, spec))
    return rules


def _ignored(rules: list[tuple[str, Matcher]], rel: str) -> bool:
    return any(rel.startswith(base) and spec(rel[len(base) :]) for base, spec in rules)


def _rules(data: bytes | None) -> Matcher | None:
    if data is None:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
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
