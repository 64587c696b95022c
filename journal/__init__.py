"""SQLite sessions and run journals; knows nothing of ACP.

`Journal` (store.py) is the entry point; the records, run states, event codec, durability
table and redaction it uses are re-exported here so callers import from `journal` alone.
"""

from journal.codec import decode_event, encode_event
from journal.durability import DURABLE_KINDS, is_durable
from journal.errors import JournalClosedError, JournalError, JournalFileError, JournalVersionError
from journal.records import EventRecord, RunRecord, SessionRecord
from journal.redact import redact
from journal.states import RESPONSE_KINDS, TERMINAL_STATES, RunState, final_state, normalize_state
from journal.store import Journal, default_path

__all__ = [
    "DURABLE_KINDS",
    "RESPONSE_KINDS",
    "TERMINAL_STATES",
    "EventRecord",
    "Journal",
    "JournalClosedError",
    "JournalError",
    "JournalFileError",
    "JournalVersionError",
    "RunRecord",
    "RunState",
    "SessionRecord",
    "decode_event",
    "default_path",
    "encode_event",
    "final_state",
    "is_durable",
    "normalize_state",
    "redact",
]
