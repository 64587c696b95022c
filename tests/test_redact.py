"""Redaction of secrets from journal payloads: every documented pattern, and text left alone."""

from __future__ import annotations

import pytest

from journal.redact import REDACTED, redact

OPENAI_KEY = "sk-" + "A1b2C3d4E5" * 5
GITHUB_TOKEN = "ghp_" + "x9Y8z7W6v5" * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc123def456ghi", "Authorization: [REDACTED]"),
        ("curl -H 'authorization: Basic dXNlcjpwYXNzd29yZA==' x", "curl -H 'authorization: [REDACTED]' x"),
        ("token was Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "token was Bearer [REDACTED]"),
        ("bearer 0123456789abcdef", "bearer [REDACTED]"),
        (f"key {OPENAI_KEY} here", "key [REDACTED] here"),
        ("sk-proj-Ab3_Cd4-Ef5Gh6Ij7Kl8Mn9", "[REDACTED]"),
        ("ANTHROPIC=sk-ant-api03-AbCdEfGhIjKlMnOpQrSt-uv", "ANTHROPIC=[REDACTED]"),
        (f"push with {GITHUB_TOKEN}", "push with [REDACTED]"),
        ("gho_" + "a1" * 18, REDACTED),
        ("ghs_" + "b2" * 18, REDACTED),
        ("github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP", REDACTED),
        ("aws_access_key_id AKIAIOSFODNN7EXAMPLE", "aws_access_key_id [REDACTED]"),
        ("ASIAIOSFODNN7EXAMPLE", REDACTED),
        ("slack xoxb-123456789012-1234567890123-AbCdEf", "slack [REDACTED]"),
        ("xoxp-1234-5678-abcdef", REDACTED),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "jwt [REDACTED]",
        ),
        ("mysql --password=hunter2 -u root", "mysql --password=[REDACTED] -u root"),
        (
            "https://api.example.com/v1?token=abc123&page=2",
            "https://api.example.com/v1?token=[REDACTED]&page=2",
        ),
        ("OPENAI_API_KEY=whatever ./run.sh", "OPENAI_API_KEY=[REDACTED] ./run.sh"),
        ("cli --api-key=k-123 --verbose", "cli --api-key=[REDACTED] --verbose"),
        ("export DB_PASSWORD='two words'", "export DB_PASSWORD='[REDACTED]'"),
        ("client_secret=abc&grant_type=x", "client_secret=[REDACTED]&grant_type=x"),
        (
            "git clone https://user:s3cr3t@github.com/o/r.git",
            "git clone https://user:[REDACTED]@github.com/o/r.git",
        ),
        ("https://x-access-token:abc@github.com", "https://x-access-token:[REDACTED]@github.com"),
        ('{"api_key": "abc123xyz"}', '{"api_key": "[REDACTED]"}'),
        ('password = "hunter2"', 'password = "[REDACTED]"'),
        ("secret: 'open sesame'", "secret: '[REDACTED]'"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter",
            "[REDACTED]\nafter",
        ),
    ],
)
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
    ],
)
def test_ordinary_text_and_code_are_kept(text: str) -> None:
    assert redact(text) == text


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
