"""HAUI (Hermes Adaptive UI v1): structured reply blocks drawn as Markdown an editor can show.

Pure: no ACP, no SQLite, no I/O. `render_reply` draws a whole reply; `ReplyFilter` does the
same for a reply arriving as deltas (what the prompt path and replay use).
"""

from acp_server.haui.render import render_fence
from acp_server.haui.stream import ReplyFilter, render_reply

__all__ = ["ReplyFilter", "render_fence", "render_reply"]
