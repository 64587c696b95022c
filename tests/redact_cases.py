"""Texts for the redaction tests (tests/test_redact.py, tests/test_stream_redact.py): secrets in
every documented form with what each redacts to, and code and prose that hold none."""

from __future__ import annotations

from journal.redact import REDACTED

OPENAI_KEY = "sk-" + "A1b2C3d4E5" * 5
GITHUB_TOKEN = "ghp_" + "x9Y8z7W6v5" * 4

# The forms the issue found missing: provider keys, `KEY = value` lines, a key without its END.
NEW_FORMS = [
    ("stripe sk_live_" + "51HxAbCdEfGhIjKlMnOp" + " ok", "stripe [REDACTED] ok"),
    ("sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc", REDACTED),
    ("restricted rk_live_" + "51HxAbCdEfGhIjKlMnOp", "restricted [REDACTED]"),
    ("HF_TOKEN hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF_TOKEN [REDACTED]"),
    ("maps?key=AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6q", "maps?key=[REDACTED]"),
    ("glpat-" + "Xy9Zx8Wv7Ut6Sr5Qp4On" + " is gitlab", "[REDACTED] is gitlab"),
    ("//registry.npmjs.org/:_authToken=npm_" + "A" * 36, "//registry.npmjs.org/:_authToken=[REDACTED]"),
    ("npm_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", REDACTED),
    ("refresh xoxe.xoxp-1-" + "Mi0yLTE3NDU2", "refresh [REDACTED]"),
    ("xoxe-1-" + "My0xLTEyMzQ1Njc4", REDACTED),
    ("[default]\naws_secret_access_key = abc\n", "[default]\naws_secret_access_key = [REDACTED]\n"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"),
    ("db:\n  password: hunter2\n  host: x", "db:\n  password: [REDACTED]\n  host: x"),
    ("Password: hunter2 # the old one", "Password: [REDACTED] # the old one"),
    ("DB_PASS=s3cret ./migrate", "DB_PASS=[REDACTED] ./migrate"),
    ("GH_PAT=abc123", "GH_PAT=[REDACTED]"),
    ("export MY_PAT = p4tv4lue\n", "export MY_PAT = [REDACTED]\n"),
    ("X-Api-Key: 0f9e8d7c6b5a", "X-Api-Key: [REDACTED]"),
    ("SECRET_KEY = django-insecure-abc", "SECRET_KEY = [REDACTED]"),
    ("postgresql://admin:Pa55@db.local:5432/app", "postgresql://admin:[REDACTED]@db.local:5432/app"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA", REDACTED),
    ("key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg", "key: [REDACTED]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0", "jwt [REDACTED]"),
    # `key = value` inside a sentence, not only at the end of its line (issue 25).
    (
        "my credentials file says aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYzz91 please keep it",
        "my credentials file says aws_secret_access_key = [REDACTED] please keep it",
    ),
    ("my password: hunter22, and the pin", "my password: [REDACTED], and the pin"),
    ("set secret = abcdefghijklmnopqrstu then go", "set secret = [REDACTED] then go"),
]

# Ordinary code and prose that mentions secrets without holding one.
NOT_SECRETS = [
    "token: str",
    "    password: Optional[str] = None",
    "api_key: str | None = None",
    "def login(password: str) -> None:",
    "password = None",
    "token = self.token",
    "api_key = settings.API_KEY",
    'password = os.environ["DB_PASSWORD"]',
    "secret_key = os.urandom(24)",
    "token = await fetch_token()",
    "password_length = 12",
    "auth: required",
    "Token: see the section below",
    "the bypass=1 flag",
    "  compass: north",
    "path=/tmp/x and compat=yes",
    "hf_hub_download(repo_id)",
    "npm_config_cache=/tmp/npm",
    "AIzaTooShort",
    "sk_test_short",
    "glpat-short",
    "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----",
    "---\ntitle: notes\n---",
    "if password:\n    check(password)",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "token = tok3n_map[x] + 1",
    "{ password: hashedPassword, email }",
    "token = self.token2 or fallback",
    "max_tokens = 4096 and more",
    "password = None if x else y",
]


DOCUMENTED = [
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
]
