"""The journal's own exceptions; callers catch these, never sqlite3's."""

from __future__ import annotations


class JournalError(Exception):
    """Base of the journal's exceptions."""


class JournalClosedError(JournalError):
    """The journal was used after `close()`."""


class JournalVersionError(JournalError):
    """The database was written by a newer journal schema than this code knows."""
