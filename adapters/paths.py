"""Keeping file access inside a session's workspace: one rule for the server and every agent."""

from __future__ import annotations

import os
from collections.abc import Sequence

from adapters.base import ToolRefused


def confine(path: str, *, cwd: str, roots: Sequence[str] = ()) -> str:
    """The real absolute path of `path` (relative to cwd), or ToolRefused when it escapes the
    roots (cwd when none are given) through `..`, a symlink or an absolute path."""
    real = os.path.realpath(os.path.join(cwd, path))
    for root in roots or (cwd,):
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return real
    raise ToolRefused(f"Refused: {path} is outside the session's workspace ({cwd})")
