"""The openai agent's settings, health, capabilities and wire parsing, without the server.

Settings are resolved from explicit arguments, a given environment and config files in a
temporary directory (never the user's). Turns that need `turn.config` run straight through
`run_turn` with a small recording sink, against the real fake endpoint.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fake_openai import Failure, FakeOpenAI, reply

from adapters.base import AgentError, CommandResult, PermissionDecision, TurnCancelled, TurnInput
from adapters.openai import OpenAIAdapter
from adapters.openai.client import retry_wait, sse_data
from adapters.openai.config import mask_key
from adapters.openai.search import _GlobRules
from adapters.openai.stream import Reply

pytest.importorskip("httpx", reason="the openai extra is not installed")

KEY = "sk-proj-abcdefgh12345678"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["gpt-4o", "llama3.2"]) as server:
        yield server


def write_config(tmp_path, text: str) -> str:
    path = tmp_path / "acp-server" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


class Sink:
    """Just enough of a sink for direct turns: records text, allows everything."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.cancelled = False

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise TurnCancelled("cancelled")

    def sleep(self, seconds: float) -> None:
        self.check_cancelled()

    def text(self, text: str) -> None:
        self.texts.append(text)

    def thought(self, text: str) -> None: ...
    def tool_call(self, title: str, **kwargs: Any) -> str:
        return "tool-1"

    def tool_update(self, tool_call_id: str, **kwargs: Any) -> None: ...
    def plan(self, entries: Sequence[Any]) -> None: ...
    def usage(self, **kwargs: Any) -> None: ...
    def title(self, title: str) -> None: ...
    def save_transcript(self, format: str, messages: Sequence[Any], *, base: bool = False) -> None: ...
    def request_permission(self, tool_call_id: str) -> PermissionDecision:
        return PermissionDecision(True)

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        raise AssertionError("not used")

    def write_text_file(self, path: str, content: str) -> str | None:
        raise AssertionError("not used")

    def run_command(
        self, command: str, *, tool_call_id: str | None = None, timeout: float | None = None
    ) -> CommandResult:
        raise AssertionError("not used")


def turn(tmp_path, text: str = "hi", **config: str) -> TurnInput:
    return TurnInput("sess_1", str(tmp_path), ({"type": "text", "text": text},), config=config)


# --- settings --------------------------------------------------------------------------


def test_flags_win_over_the_environment_which_wins_over_the_file_and_each_source_is_shown(tmp_path):
    path = write_config(
        tmp_path,
        '[openai]\nbase_url = "http://file:1/v1"\nmodel = "file-model"\n'
        'api_key = "sk-file-key-00000000"\ntemperature = 0.2\n',
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path), "OPENAI_BASE_URL": "http://env:2/v1", "ACP_SERVER_MODEL": "env-model"}
    adapter = OpenAIAdapter(model="flag-model", env=env)
    s = adapter.settings
    assert (s.model, s.base_url, s.api_key, s.temperature, s.max_turn_requests) == (
        "flag-model",
        "http://env:2/v1",
        "sk-file-key-00000000",
        0.2,
        25,
    )
    assert dict(s.sources) == {
        "model": "flag",
        "base_url": "env OPENAI_BASE_URL",
        "api_key": f"file {path}",
        "temperature": f"file {path}",
        "max_turn_requests": "default",
        "context_window": "default",
        "vision": "default",
    }
    assert s.display()["api_key"] == ("set (sk-…0000)", f"file {path}")


def test_the_config_file_can_be_named_by_acp_server_config_and_health_reports_its_problems(tmp_path):
    path = tmp_path / "elsewhere.toml"
    path.write_text('[openai]\nmodle = "typo"\nmax_turn_requests = 0\n')
    adapter = OpenAIAdapter(env={"ACP_SERVER_CONFIG": str(path)})
    health = adapter.health()
    assert not health.ok
    assert "unknown key 'modle' in [openai]" in health.detail
    assert "max_turn_requests from file" in health.detail and "at least 1, got 0" in health.detail
    assert health.settings["config_file"] == (str(path), "found")
    with pytest.raises(AgentError, match="The openai agent is misconfigured: config file"):
        adapter.run_turn(turn(tmp_path), Sink())


@pytest.mark.parametrize("kind", ["fifo", "writable by others"])
def test_a_config_file_that_is_a_fifo_or_writable_by_others_is_not_read_and_health_says_why(tmp_path, kind):
    import os

    path = tmp_path / "config.toml"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer for ever
    else:
        path.write_text('[openai]\nbase_url = "http://attacker.invalid/v1"\n')
        os.chmod(path, 0o666)
    adapter = OpenAIAdapter(env={"ACP_SERVER_CONFIG": str(path)}, api_key=KEY)
    health = adapter.health()
    assert adapter.settings.base_url == "https://api.openai.com/v1"
    said = "is a FIFO, not a regular file" if kind == "fifo" else "is writable by others (mode 0666)"
    assert f"the config file {path} {said}" in health.detail


def test_the_key_is_never_shown_whole():
    assert mask_key("sk-proj-abcdefgh12345678") == "set (sk-…5678)"
    assert mask_key("short") == "set"
    assert mask_key(None) == "not set"


def test_openai_without_a_key_says_what_to_set_without_touching_the_network(tmp_path):
    adapter = OpenAIAdapter(model="gpt-4o", env={"XDG_CONFIG_HOME": str(tmp_path)})
    expected = (
        f"No API key for https://api.openai.com/v1. Set OPENAI_API_KEY or api_key in "
        f"[openai] of {tmp_path / 'acp-server' / 'config.toml'}, or run `acp-server setup`."
    )
    assert adapter.health().detail == expected
    assert adapter.capabilities().context_window == 128_000
    with pytest.raises(AgentError) as caught:
        adapter.run_turn(turn(tmp_path), Sink())
    assert str(caught.value) == expected


# --- health and capabilities -------------------------------------------------------------


def test_health_checks_the_endpoint_and_lists_settings_with_their_sources(fake, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "OPENAI_API_KEY": KEY}
    health = OpenAIAdapter(model="gpt-4o", base_url=fake.base_url, env=env).health()
    assert health.ok
    assert health.detail == f"{fake.base_url} answered with 2 models; using gpt-4o"
    assert health.settings["base_url"] == (fake.base_url, "flag")
    assert health.settings["api_key"] == ("set (sk-…5678)", "env OPENAI_API_KEY")
    assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_health_of_an_unreachable_endpoint_says_what_failed_and_what_to_set(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    health = OpenAIAdapter(model="m", base_url=base, env={"XDG_CONFIG_HOME": str(tmp_path)}).health()
    assert not health.ok
    assert health.detail.startswith(f"Cannot reach the model endpoint {base} (connection refused). Set OPENAI_BASE_URL")


def test_the_model_option_offers_the_endpoints_models_and_effort_offers_three_levels(fake, tmp_path):
    fake.models.append({"id": "big-local", "object": "model", "max_model_len": 32_768})
    adapter = OpenAIAdapter(model="big-local", base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    caps = adapter.capabilities()
    model, effort, style = caps.config_options
    assert (model.id, model.category, model.default) == ("model", "model", "big-local")
    assert [c.value for c in model.choices] == ["big-local", "gpt-4o", "llama3.2"]
    assert (effort.id, effort.category, effort.default) == ("reasoning_effort", "thought_level", "default")
    assert [c.value for c in effort.choices] == ["default", "low", "medium", "high"]
    assert (style.id, style.default, [c.value for c in style.choices]) == (
        "response_style",
        "plain",
        ["plain", "rich", "vivid"],
    )
    assert caps.context_window == 32_768 and caps.streaming and not caps.image and caps.cancel_latency == 1.0


def test_without_a_model_listing_the_configured_model_is_the_only_choice(fake, tmp_path):
    fake.models_failure = Failure(500, "no listing here")
    adapter = OpenAIAdapter(model="mine", base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    (model, _, _) = adapter.capabilities().config_options
    assert [c.value for c in model.choices] == ["mine"]
    assert adapter.capabilities().context_window is None


def test_a_model_listing_that_is_not_a_list_counts_as_no_listing(fake, tmp_path):
    fake.models = None  # the endpoint answers {"object": "list", "data": null}
    adapter = OpenAIAdapter(model="mine", base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    (model, _, _) = adapter.capabilities().config_options
    assert [c.value for c in model.choices] == ["mine"]
    health = adapter.health()
    assert not health.ok
    assert health.detail == f"{fake.base_url}/models did not answer with a model list"


def test_a_turn_uses_the_model_and_effort_chosen_in_the_session_config(fake, tmp_path):
    fake.script(reply("ok"))
    adapter = OpenAIAdapter(model="gpt-4o", base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    sink = Sink()
    assert adapter.run_turn(turn(tmp_path, model="llama3.2", reasoning_effort="high"), sink) == "end_turn"
    assert (fake.chats[0]["model"], fake.chats[0]["reasoning_effort"]) == ("llama3.2", "high")
    assert sink.texts == ["ok"]
    adapter.close()


def test_with_no_model_configured_the_endpoints_first_model_is_used_or_the_user_is_told(fake, tmp_path):
    fake.script(reply("ok"))
    adapter = OpenAIAdapter(base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert adapter.run_turn(turn(tmp_path), Sink()) == "end_turn"
    assert fake.chats[0]["model"] == "gpt-4o"
    fake.models.clear()
    empty = OpenAIAdapter(base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    with pytest.raises(AgentError, match=r"No model is configured for .* Pass --model, set ACP_SERVER_MODEL"):
        empty.run_turn(turn(tmp_path), Sink())
    adapter.close()
    empty.close()


def test_a_cancelled_backoff_ends_the_turn_without_another_request(fake, tmp_path):
    fake.script(Failure(429, "wait"), reply("never"))
    adapter = OpenAIAdapter(model="m", base_url=fake.base_url, env={"XDG_CONFIG_HOME": str(tmp_path)})
    sink = Sink()

    def cancelled_sleep(seconds: float) -> None:
        assert seconds == 1.0  # no Retry-After: the first backoff step
        sink.cancelled = True
        sink.check_cancelled()

    sink.sleep = cancelled_sleep  # type: ignore[method-assign]
    with pytest.raises(TurnCancelled):
        adapter.run_turn(turn(tmp_path), sink)
    assert len(fake.chats) == 1
    adapter.close()


# --- parsing ---------------------------------------------------------------------------


def test_server_sent_events_join_data_lines_and_skip_comments_and_other_fields():
    lines = [": comment", "event: message", 'data: {"a":', "data: 1}", "", "id: 3", "data:[DONE]", ""]
    assert list(sse_data(lines)) == ['{"a":\n1}', "[DONE]"]


def test_chunk_parts_of_the_wrong_json_type_are_skipped_and_the_rest_is_kept():
    reply = Reply()
    sink = Sink()
    malformed = [
        {"choices": [{"index": 0, "delta": "not an object", "finish_reason": 7}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": "read_file"}]}}]},
        {"choices": "none", "usage": ["not", "an", "object"]},
    ]
    for chunk in malformed:
        reply.feed(chunk, sink)
    reply.feed({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}, sink)
    assert sink.texts == ["ok"]
    assert (reply.finish_reason, reply.usage) == ("stop", None)
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls()] == [("c1", "", "")]


def test_retry_after_is_honoured_in_seconds_milliseconds_or_as_a_date_and_capped():
    assert retry_wait({"retry-after": "2"}, 0) == 2.0
    assert retry_wait({"retry-after-ms": "250"}, 0) == 0.25
    assert retry_wait({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0) == 0.0
    assert retry_wait({"retry-after": "3600"}, 0) == 30.0
    assert [retry_wait({}, attempt) for attempt in range(3)] == [1.0, 2.0, 4.0]


def test_the_gitignore_fallback_understands_globs_anchors_directories_and_negation():
    rules = _GlobRules(["# c", "*.log", "!keep.log", "build/", "/top.txt", "docs/*.tmp"])
    assert [
        rules.match(p)
        for p in ["a/x.log", "keep.log", "build/", "a/build/", "build", "top.txt", "docs/a.tmp", "src/main.py"]
    ] == [True, False, True, True, False, True, True, False]
