"""A prompt's content blocks as the user message the model reads.

Text stays text (a text-only prompt is one string, as before); an image becomes an image part
(a data URL); an embedded text resource becomes a text part that names its URI; a resource link
to a file inside the session's directories is read through the sink (the editor's `fs` when it
offered it, else the local disk) and attached the same way; other links are named.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from adapters.base import Sink, ToolRefused
from adapters.openai.jsonvalues import is_object
from adapters.paths import target

MAX_ATTACHED_CHARS = 50_000


def user_message(
    blocks: Sequence[dict[str, Any]], sink: Sink, *, cwd: str, roots: Sequence[str] = ()
) -> dict[str, Any]:
    parts = [part for block in blocks if (part := _part(block, sink, cwd=cwd, roots=roots)) is not None]
    if all(part["type"] == "text" for part in parts):
        return {"role": "user", "content": "\n".join(part["text"] for part in parts)}
    return {"role": "user", "content": parts}


def _part(block: dict[str, Any], sink: Sink, *, cwd: str, roots: Sequence[str]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return _text(str(block.get("text", "")))
    if kind == "image" and isinstance(block.get("data"), str):
        url = f"data:{block.get('mimeType') or 'image/png'};base64,{block['data']}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if is_object(resource) else {}
        uri = str(resource.get("uri", ""))
        if isinstance(text := resource.get("text"), str):
            return _text(_attached(uri, text))
        return _text(f"[attached binary resource {uri}, not shown]")
    if kind == "resource_link":
        return _text(_link(block, sink, cwd=cwd, roots=roots))
    return None


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _attached(uri: str, text: str) -> str:
    if len(text) > MAX_ATTACHED_CHARS:
        text = text[:MAX_ATTACHED_CHARS] + f"\n[{len(text) - MAX_ATTACHED_CHARS} more characters not attached]"
    return f'<resource uri="{uri}">\n{text}\n</resource>'


def _link(block: dict[str, Any], sink: Sink, *, cwd: str, roots: Sequence[str]) -> str:
    uri = str(block.get("uri", ""))
    path = local_path(uri)
    if path is None:
        return f"[linked: {uri}]"
    try:
        return _attached(uri, sink.read_text_file(target(path, cwd=cwd, roots=(cwd, *roots)).path))
    except (ToolRefused, OSError, UnicodeError) as exc:
        return f"[linked: {uri} (not attached: {exc})]"


def local_path(uri: str) -> str | None:
    """The absolute path of a `file:` URI (or of an absolute path given as is), else None."""
    if os.path.isabs(uri):
        return uri
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return unquote(parts.path)
