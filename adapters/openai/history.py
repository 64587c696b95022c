"""A session's conversation as the model saw it, kept in the journal through `sink.save_transcript`.

The transcript holds Chat Completions messages: the system message, each prompt (with its
attachments), assistant messages with their tool calls and reasoning, and tool results, these
cut to `STORED_RESULT_CHARS` with a visible marker. A turn starts from the saved transcript
(live or after a restart alike), saves each finished model round, and rebases after compacting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.base import Message, Sink, SystemPrompt, Transcript
from adapters.openai.prefix import with_instructions

FORMAT = "openai-chat/1"
STORED_RESULT_CHARS = 16_000
# Fields a provider streams its reasoning in; sent back only within the turn that made it (the
# tool loop of DeepSeek's and Kimi's thinking modes needs it there; older turns must not carry it).
REASONING_FIELDS = ("reasoning_content", "reasoning")
SUMMARY_MARK = "[Context compacted: the earlier part of this conversation, summarized]"


def stored(message: dict[str, Any]) -> dict[str, Any]:
    """The message as the history keeps it: a long tool result cut with a visible marker."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str) or len(content) <= STORED_RESULT_CHARS:
        return message
    cut = len(content) - STORED_RESULT_CHARS
    marker = f"\n[{cut} more characters of this tool result were dropped from the history; run the tool again]"
    return {**message, "content": content[:STORED_RESULT_CHARS] + marker}


def plain(message: Message) -> dict[str, Any]:
    return {"role": "user" if message.role == "user" else "assistant", "content": message.text}


@dataclass(slots=True)
class History:
    """The messages of one turn's requests; `messages[0]` is the system message and
    `turn_start` the index of the current prompt. `saved` messages are already journaled,
    unless `rebase` (a compaction, or a transcript of another shape) asks to replace them all."""

    messages: list[dict[str, Any]]
    saved: int
    rebase: bool
    turn_start: int = 0
    style: str = ""  # this turn's response-style context: sent before the prompt, never saved
    # The client's system prompt, applied to the saved system message as it is sent, never saved:
    # a session/load or resume that brings another one takes effect at the next request.
    instructions: SystemPrompt | None = None

    @classmethod
    def resume(cls, transcript: Transcript | None, plain_history: Sequence[Message], system: str) -> History:
        """The saved transcript when it is ours, else the plain history behind a new system
        message; turns the agent did not see in its own form (`since`) follow as plain text."""
        if transcript is not None and transcript.format == FORMAT and transcript.messages:
            messages = [dict(m) for m in transcript.messages]
            history = cls(messages, saved=len(messages), rebase=False)
            since = transcript.since
        else:
            messages = [{"role": "system", "content": system}, *(plain(m) for m in plain_history)]
            history = cls(messages, saved=0, rebase=True)
            since = ()
        history.messages.extend(plain(m) for m in since)
        return history

    def start_turn(self, prompt: dict[str, Any]) -> None:
        self.turn_start = len(self.messages)
        self.messages.append(prompt)

    def add(self, *messages: dict[str, Any]) -> None:
        self.messages.extend(messages)

    def replace(self, messages: list[dict[str, Any]], turn_start: int) -> None:
        """After a compaction: the new conversation replaces the saved one at the next save."""
        self.messages, self.turn_start, self.rebase = messages, turn_start, True

    def save(self, sink: Sink) -> None:
        """Journal what is not saved yet (everything, with `base`, after a rebase)."""
        start = 0 if self.rebase else self.saved
        if start >= len(self.messages):
            return
        sink.save_transcript(FORMAT, [stored(m) for m in self.messages[start:]], base=self.rebase)
        self.saved, self.rebase = len(self.messages), False

    def framing(self) -> list[dict[str, Any]]:
        """What every request of the turn sends besides the conversation: the system message and
        the turn's style context."""
        return [self._system(), *self._style()]

    def outgoing(self) -> list[dict[str, Any]]:
        """The messages to send: reasoning only on the current turn's assistant messages, and the
        turn's style context just before its prompt (after the stable prefix, so the cache holds)."""
        sent = [
            _without_reasoning(m) if i < self.turn_start and m.get("role") == "assistant" else m
            for i, m in enumerate(self.messages)
        ]
        sent[self.turn_start : self.turn_start] = self._style()
        sent[0] = self._system()
        return sent

    def _system(self) -> dict[str, Any]:
        first = self.messages[0]
        if self.instructions is None or first.get("role") != "system":
            return first
        return {**first, "content": with_instructions(str(first.get("content", "")), self.instructions)}

    def _style(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.style}] if self.style else []


def _without_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    if not any(name in message for name in REASONING_FIELDS):
        return message
    return {k: v for k, v in message.items() if k not in REASONING_FIELDS}
