"""Redaction of secrets: every documented pattern, ordinary text and code left alone, and a second
pass that changes nothing (the journal redacts again what the editor was already shown)."""

from __future__ import annotations

import pytest
from redact_cases import DOCUMENTED, GITHUB_TOKEN, NEW_FORMS, NOT_SECRETS, OPENAI_KEY

from journal.redact import REDACTED, redact


@pytest.mark.parametrize(("text", "expected"), DOCUMENTED + NEW_FORMS)
def test_each_documented_secret_pattern_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "tokenizer",
        "the tokenizer splits words into tokens",
        "the password field is empty",
        "def token():",
        "token = get_token()",
        "if token == expected:",
        "max_tokens=4096",
        'password = ""',
        "the bearer of bad news",
        "bearer instruments",
        "Asia and Africa",
        "https://example.com:8080/path?page=2",
        "git@github.com:owner/repo.git",
        "task-abcdefghijklmnopqrstuvwxyz",
        "pip install sk-learn-compatible-estimators",
        "author: Jane, keyboard: qwerty",
        "auth: required for every request",
        "ghp_short",
        "AKIA lowercase akiaiosfodnn7example",
        "",
        "ok",
        *NOT_SECRETS,
    ],
)
def test_ordinary_text_and_code_are_kept(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [text for text, _ in DOCUMENTED + NEW_FORMS] + NOT_SECRETS)
def test_redacting_again_changes_nothing(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_values_of_secret_looking_keys_are_redacted_whatever_they_hold() -> None:
    value = {
        "api_key": "plain",
        "apiKey": "camel",
        "X-Api-Key": "header",
        "access_token": "t",
        "accessToken": "t",
        "Authorization": "Basic abc",
        "auth": {"user": "me", "pass": "x"},
        "credentials": ["a", "b"],
        "private-key": "pem",
        "client_secret": 12345,
        "PASSWD": "p",
        "password": None,
        "token": "",
        "secret": False,
    }
    assert redact(value) == {
        "api_key": REDACTED,
        "apiKey": REDACTED,
        "X-Api-Key": REDACTED,
        "access_token": REDACTED,
        "accessToken": REDACTED,
        "Authorization": REDACTED,
        "auth": REDACTED,
        "credentials": REDACTED,
        "private-key": REDACTED,
        "client_secret": REDACTED,
        "PASSWD": REDACTED,
        "password": None,
        "token": "",
        "secret": False,
    }


def test_ordinary_keys_are_kept_and_nested_strings_are_scanned() -> None:
    value = {
        "max_tokens": 100,
        "input_tokens": 5,
        "tokenizer": "bpe",
        "author": "me",
        "sort_key": "name",
        "command": ["curl", "-H", f"Authorization: Bearer {OPENAI_KEY}"],
        "env": ({"name": "HOME", "value": "/root"},),
        "count": 3,
        "ratio": 0.5,
        "enabled": True,
    }
    assert redact(value) == {
        **value,
        "command": ["curl", "-H", "Authorization: [REDACTED]"],
        "env": ({"name": "HOME", "value": "/root"},),
    }


def test_redaction_returns_a_copy_and_leaves_the_input_alone() -> None:
    original = {"token": "abc", "nested": [f"use {GITHUB_TOKEN}"]}
    redacted = redact(original)
    assert original == {"token": "abc", "nested": [f"use {GITHUB_TOKEN}"]}
    assert redacted == {"token": REDACTED, "nested": ["use [REDACTED]"]}


def test_non_text_values_pass_through_unchanged() -> None:
    assert [redact(v) for v in (None, 7, 2.5, True)] == [None, 7, 2.5, True]


def test_dict_keys_are_scanned_like_text_so_a_remembered_command_keeps_no_secret() -> None:
    remembered = {f"fetch:curl -H 'Authorization: Bearer {'t0ken' * 6}'": True, "read:read_file": False}
    assert redact(remembered) == {"fetch:curl -H 'Authorization: [REDACTED]'": True, "read:read_file": False}
