"""Text files for a turn: through the editor when it offered `fs.*`, else on the local disk.

Local access is confined to the session's roots (cwd plus additional directories): paths that
escape through `..`, symlinks or absolute paths are refused. `slice_lines` and `replace_text`
are also what the `prompt` client uses to serve `fs/*` from its own disk, so both ends of the
protocol slice and write the same way.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any

import anyio

from acp_server.protocol import methods
from acp_server.protocol.answers import Acknowledged
from acp_server.protocol.models import ReadTextFileResult
from acp_server.turns.client import ClientCapabilities, EditorChannel
from adapters.base import ToolRefused
from adapters.paths import confine


def slice_lines(text: str, line: int | None, limit: int | None) -> str:
    """`fs/read_text_file` semantics: from 1-based `line` (default 1), at most `limit` lines."""
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max((line or 1) - 1, 0)
    return "".join(lines[start:] if limit is None else lines[start : start + limit])


def replace_text(path: str, content: str) -> None:
    """Write `content` to `path` (through a symlink, keeping the mode), creating missing parent
    directories. Readers see the old text or the new, never half of it. Raises `OSError`."""
    real = os.path.realpath(path)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    # Per thread: two writes of one file at once must not share a temporary file.
    tmp = f"{real}.acp-{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, os.stat(real).st_mode & 0o7777)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


@dataclass(frozen=True, slots=True, kw_only=True)
class Files:
    channel: EditorChannel
    client: ClientCapabilities
    cwd: str
    roots: tuple[str, ...]

    async def read(self, path: str, line: int | None, limit: int | None) -> str:
        if self.client.read_text_file:
            params: dict[str, Any] = {"path": self._absolute(path)}
            if line is not None:
                params["line"] = line
            if limit is not None:
                params["limit"] = limit
            return (await self.channel.ask(methods.FS_READ_TEXT_FILE, params, ReadTextFileResult)).content
        real = confine(path, cwd=self.cwd, roots=self.roots)
        return slice_lines(await anyio.to_thread.run_sync(_read_local, real, path), line, limit)

    async def write(self, path: str, content: str) -> str | None:
        """Write the file; returns its old text, or None when it did not exist or was unreadable."""
        old: str | None
        try:
            old = await self.read(path, None, None)
        except ToolRefused:
            old = None
        if self.client.write_text_file:
            params = {"path": self._absolute(path), "content": content}
            await self.channel.ask(methods.FS_WRITE_TEXT_FILE, params, Acknowledged)
            return old
        real = confine(path, cwd=self.cwd, roots=self.roots)
        await anyio.to_thread.run_sync(_write_local, real, content)
        return old

    def _absolute(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.cwd, path))


def _read_local(real: str, shown: str) -> str:
    try:
        with open(real, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        raise ToolRefused(f"No such file: {shown}") from None
    except IsADirectoryError:
        raise ToolRefused(f"{shown} is a directory") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot read {shown}: {exc.strerror}") from None


def _write_local(real: str, content: str) -> None:
    try:
        replace_text(real, content)
    except OSError as exc:
        raise ToolRefused(f"Cannot write {real}: {exc.strerror}") from None
