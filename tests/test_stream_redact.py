"""Redaction of text that arrives in pieces (`StreamRedactor`) and of a run's events
(`RunRedactor`): however a reply is cut into deltas, no piece shows a secret, the pieces add up
to the text redacted whole, and each piece is left as it is by the journal's own second pass."""

from __future__ import annotations

import random

import pytest
from redact_cases import DOCUMENTED, NEW_FORMS, NOT_SECRETS

from adapters.events import (
    Envelope,
    PlanEntry,
    PlanUpdated,
    TextContent,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
    ToolCallUpdated,
    TurnFinished,
    UsageReported,
)
from journal.redact import HOLD_CAP, REDACTED, RunRedactor, StreamRedactor, redact_text

KEY = "sk-proj-Q7w8E9r0T1y2U3i4O5p6"
SECRET_TEXTS = [text for text, expected in DOCUMENTED + NEW_FORMS if expected != text]


def streamed(deltas: list[str]) -> list[str]:
    """The pieces a StreamRedactor lets out for the deltas, then at the end of the stream."""
    stream = StreamRedactor()
    return [piece for delta in deltas for piece in stream.feed(delta)] + stream.finish()


def cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_a_key_streamed_one_character_at_a_time_is_never_shown_whole_or_in_part() -> None:
    shown = streamed(list(f"Use {KEY} for the call."))
    assert "".join(shown) == "Use [REDACTED] for the call."
    assert not any("Q7w8" in piece or "sk-p" in piece for piece in shown)


@pytest.mark.parametrize("text", SECRET_TEXTS + NOT_SECRETS)
def test_cut_anywhere_in_two_a_text_streams_as_it_redacts_whole(text: str) -> None:
    for at in range(1, len(text)):
        assert "".join(streamed([text[:at], text[at:]])) == redact_text(text), f"cut at {at}"


@pytest.mark.parametrize("text", SECRET_TEXTS + NOT_SECRETS)
def test_one_character_per_delta_streams_as_the_text_redacts_whole(text: str) -> None:
    assert "".join(streamed(list(text))) == redact_text(text)


def test_random_cuts_of_prose_code_and_secrets_never_show_more_than_whole_text_redaction() -> None:
    rng = random.Random(5)
    parts = [*SECRET_TEXTS, *NOT_SECRETS, "the tokenizer splits words. ", "\n", "keys ", "a pass "]
    for _ in range(1000):
        text = "".join(rng.choice(parts) + rng.choice([" ", "\n"]) for _ in range(rng.randint(1, 6)))
        pieces, at = [], 0
        while at < len(text):
            size = rng.randint(1, 12)
            pieces.append(text[at : at + size])
            at += size
        shown = streamed(pieces)
        assert "".join(shown) == redact_text(text), pieces
        assert [redact_text(piece) for piece in shown] == shown  # the journal's pass keeps them


def test_text_with_nothing_like_a_secret_in_it_passes_at_once_unchanged() -> None:
    stream = StreamRedactor()
    delta = "x" * 16
    assert [stream.feed(delta) for _ in range(3)] == [[delta]] * 3
    assert stream.feed(delta)[0] is delta
    prose = "The quick brown fox jumps over the lazy dog. "
    assert stream.feed(prose) == [prose]
    assert stream.finish() == []


@pytest.mark.parametrize(
    ("text", "shown_first"),
    [
        ("Use sk-pr", "Use "),
        ("push ghp_12", "push "),
        ("id AKIA", "id "),
        ("password = ", ""),
        ("clone https://user:", "clone "),
        ("Authorization: Bearer ", ""),
        ("-----BEGIN RSA PRI", ""),
        ('{"api_key": "abc', ""),
    ],
)
def test_a_possible_secrets_start_is_held_back_until_the_token_ends(text: str, shown_first: str) -> None:
    stream = StreamRedactor()
    assert "".join(stream.feed(text)) == shown_first
    assert shown_first + "".join(stream.finish()) == redact_text(text)


def test_what_was_held_back_is_shown_once_the_token_turns_out_harmless() -> None:
    stream = StreamRedactor()
    assert stream.feed("ask the tok") == ["ask the tok"]  # a key name's start: the next delta is read after it
    assert stream.feed("enizer ") == ["enizer "]
    assert stream.feed("password") == []
    assert stream.feed(" field is empty.") == ["password field is empty."]


def test_a_key_names_first_letters_are_shown_and_what_follows_is_redacted_after_them() -> None:
    assert "".join(streamed(["Auth: b", "ear", "er 0123456789abcdef ok"])) == "Auth: bearer [REDACTED] ok"
    assert "".join(streamed(["DB_PA", "SS=s3cret ./run"])) == "DB_PASS=[REDACTED] ./run"
    assert streamed(["a pas", "ta dish"]) == ["a pas", "ta dish"]


def test_a_long_token_is_held_back_no_longer_than_the_cap_and_a_secret_in_it_stays_hidden() -> None:
    stream = StreamRedactor()
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJ" + "c" * (2 * HOLD_CAP) + ".c2lnbmF0dXJlVmFsdWU"
    shown = ["".join(stream.feed(piece)) for piece in cut(f"token {jwt} done", 5)]
    assert "".join(shown[: HOLD_CAP // 5 + 2]) == "token [REDACTED]"  # let out before the token ended
    assert "".join(shown) + "".join(stream.finish()) == "token [REDACTED] done"


def test_a_private_key_is_one_redaction_from_begin_to_end_and_the_text_after_it_is_shown() -> None:
    key = "-----BEGIN PRIVATE KEY-----\nMIIBVwIBADANBgkqhkiG9w0BAQEFAASCAUEwggE9\n-----END PRIVATE KEY-----"
    assert "".join(streamed(cut(f"Here:\n{key}\nDone.", 3))) == "Here:\n[REDACTED]\nDone."


def test_a_private_key_without_its_end_line_is_redacted_to_the_end_of_the_stream() -> None:
    shown = streamed(cut("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nQm9ndXM\n", 4))
    assert "".join(shown) == "key:\n[REDACTED]"


def envelope(event: object, seq: int) -> Envelope:
    return Envelope("run_1", "sess_1", seq, event, 1.0)  # type: ignore[arg-type]


def run(events: list[object]) -> list[Envelope]:
    redactor = RunRedactor()
    return [shown for seq, event in enumerate(events, 1) for shown in redactor.envelopes(envelope(event, seq))]


def test_a_run_holds_a_split_key_back_and_lets_it_out_redacted_before_the_next_tool_call() -> None:
    tool = ToolCallStarted("call_1", "Run it", "execute")
    shown = run([TextDelta("Key: sk-pr"), TextDelta("oj-Q7w8E9"), TextDelta("r0T1y2U3i4O5p6"), tool])
    assert [(e.seq, e.event) for e in shown] == [
        (1, TextDelta("Key: ")),
        (2, TextDelta(REDACTED)),
        (3, tool),
    ]


def test_every_field_of_every_event_is_redacted_as_the_journal_would_store_it() -> None:
    shown = run(
        [
            ToolCallStarted("call_1", f"curl with {KEY}", "fetch", raw_input={"token": "abc", "url": "https://x"}),
            ToolCallUpdated("call_1", "completed", content=(TextContent(f"echo {KEY}"),), raw_output={"key": KEY}),
            PlanUpdated((PlanEntry(f"rotate {KEY}"),)),
            ThoughtDelta(f"the key is {KEY} "),
            TurnFinished("error", f"upstream refused {KEY}"),
        ]
    )
    assert [e.event for e in shown] == [
        ToolCallStarted("call_1", "curl with [REDACTED]", "fetch", raw_input={"token": REDACTED, "url": "https://x"}),
        ToolCallUpdated("call_1", "completed", content=(TextContent("echo [REDACTED]"),), raw_output={"key": REDACTED}),
        PlanUpdated((PlanEntry("rotate [REDACTED]"),)),
        ThoughtDelta("the key is [REDACTED] "),
        TurnFinished("error", "upstream refused [REDACTED]"),
    ]


def test_text_and_thoughts_are_separate_streams_and_usage_interrupts_neither() -> None:
    shown = run(
        [
            TextDelta("use sk-proj-"),
            ThoughtDelta("thinking "),
            UsageReported(1, 2),
            TextDelta("Q7w8E9r0T1y2U3i4O5p6 now"),
            TurnFinished("end_turn"),
        ]
    )
    assert [e.event for e in shown] == [
        TextDelta("use "),
        ThoughtDelta("thinking "),
        UsageReported(1, 2),
        TextDelta("[REDACTED] now"),
        TurnFinished("end_turn"),
    ]
    assert [e.seq for e in shown] == [1, 2, 3, 4, 5]


def test_the_end_of_a_run_lets_out_what_each_stream_still_holds() -> None:
    shown = run([TextDelta("see ghp_12"), ThoughtDelta("hmm, sk-"), TurnFinished("end_turn")])
    assert [e.event for e in shown] == [
        TextDelta("see "),
        ThoughtDelta("hmm, "),
        TextDelta("ghp_12"),
        ThoughtDelta("sk-"),
        TurnFinished("end_turn"),
    ]


def test_text_held_back_at_the_end_of_an_agents_message_is_let_out_with_that_message() -> None:
    first, second = TextDelta("Key: sk-pr", "m1"), TextDelta("Hello", "m2")
    shown = [e.event for e in run([first, second, TurnFinished("end_turn")])]
    assert shown == [
        TextDelta("Key: ", "m1"),
        TextDelta("sk-pr", "m1"),
        TextDelta("Hello", "m2"),
        TurnFinished("end_turn"),
    ]
