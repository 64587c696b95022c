"""Text files for a turn: through the editor when it offered `fs.*`, else on the local disk.

Either way a path must lie in the session's roots (cwd plus additional directories): paths that
escape through `..`, symlinks or absolute paths are refused before the editor is asked, and the
editor is asked for the path's real location (`adapters.paths.target`), the very place that was
checked: never a spelling whose `..` cancels a symlink's name and names a file outside. Local
access goes through the one path opener (`adapters.paths`), which also refuses symlinks swapped
in while the file is opened, and reads only the lines asked for (`adapters.excerpt`). That and
`replace_text` are also what the `prompt` client uses to serve `fs/*` from its own disk, so
both ends of the protocol slice and write the same way.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import anyio

from acp_server.protocol import methods
from acp_server.turns.client import ClientCapabilities, EditorChannel
from adapters.frozen import frozen
from adapters.paths import read_text, target, write_text


def replace_text(path: str, content: str) -> None:
    """Write `content` to the absolute `path` anywhere on the disk, as an editor does (through a
    symlink, keeping the mode), creating missing parent directories. Readers see the old text or
    the new, never half of it. Raises `ToolRefused` with the reason."""
    write_text(path, content, cwd=os.sep, roots=(os.sep,))


@frozen(kw_only=True)
class Files:
    channel: EditorChannel
    client: ClientCapabilities
    cwd: str
    roots: tuple[str, ...]

    async def read(self, path: str, line: int | None, limit: int | None) -> str:
        from acp_server.protocol.models import ReadTextFileResult  # pydantic: with the first answer

        if self.client.read_text_file:
            params: dict[str, Any] = {"path": self._absolute(path)}
            if line is not None:
                params["line"] = line
            if limit is not None:
                params["limit"] = limit
            return (await self.channel.ask(methods.FS_READ_TEXT_FILE, params, ReadTextFileResult)).content
        local = functools.partial(read_text, path, cwd=self.cwd, roots=self.roots, line=line, limit=limit)
        return await anyio.to_thread.run_sync(local)  # streamed: only the lines asked for are read

    async def write(self, path: str, content: str) -> None:
        """Write the file (the agent read it already if it wanted its old text for a diff)."""
        from acp_server.protocol.answers import Acknowledged

        if self.client.write_text_file:
            params = {"path": self._absolute(path), "content": content}
            await self.channel.ask(methods.FS_WRITE_TEXT_FILE, params, Acknowledged)
            return
        await anyio.to_thread.run_sync(functools.partial(write_text, path, content, cwd=self.cwd, roots=self.roots))

    def _absolute(self, path: str) -> str:
        """The path the editor is asked about: where `path` really is, inside the roots."""
        return target(path, cwd=self.cwd, roots=self.roots).path
