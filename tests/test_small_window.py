"""The openai agent on a model with a small context window (Ollama's default `num_ctx` is 2048),
against the fake model over real HTTP through the real server stack: the estimate of a request's
size learns from the `prompt_tokens` the endpoint reports, the fixed part stays small, and only
what really cannot fit is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Failure, FakeOpenAI, Stream, reply
from harness import running

from acp_server.acp.handlers import AcpAgent
from adapters.openai import OpenAIAdapter, context
from adapters.openai.context import DEFAULT, MAX_CHARS_PER_TOKEN, MIN_CHARS_PER_TOKEN, Estimate, budget_of
from adapters.openai.prefix import IDENTITY, TERSE_IDENTITY

pytest.importorskip("httpx", reason="the openai extra is not installed")

KEY = "sk-test-0123456789abcd"
WINDOW = 2_000
ACCEPTED_CHARS = 8_000  # what the endpoint takes: 4 characters a token of a 2,000-token window
FILE = "".join(f"{i:02} {'x' * 26}\n" for i in range(50))  # 1,500 characters


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["llama3.2"]) as server:
        server.max_request_chars = ACCEPTED_CHARS
        server.prompt_chars_per_token = 4
        yield server


@pytest.fixture
def adapter(tmp_path: Path) -> Iterator[Callable[..., OpenAIAdapter]]:
    """Make openai agents for the fake model whose config file sets `context_window`."""
    made: list[OpenAIAdapter] = []

    def make(fake: FakeOpenAI, window: int = WINDOW) -> OpenAIAdapter:
        config = tmp_path / "config" / "acp-server" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"[openai]\ncontext_window = {window}\n")
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        made.append(OpenAIAdapter(env=env, model="llama3.2", base_url=fake.base_url, api_key=KEY))
        return made[-1]

    yield make
    for one in made:
        one.close()


def reads_then_answers(body: dict[str, Any]) -> Stream | Failure:
    if "tools" not in body:
        return reply("SUMMARY: the user had notes.txt read in each turn.")
    if body["messages"][-1]["role"] == "tool":
        return reply("It lists fifty numbered lines.")
    return reply(tools=[("read_file", {"path": "notes.txt"})])


def sizes(fake: FakeOpenAI) -> list[int]:
    return [len(r.raw) for r in fake.requests if r.path.endswith("/chat/completions")]


async def test_twelve_turns_each_reading_a_file_end_turn_on_a_2000_token_window(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(FILE)
    fake.responder = reads_then_answers
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        stops = [(await editor.prompt(sid, f"turn {n}: read notes.txt"))["stopReason"] for n in range(12)]
    assert stops == ["end_turn"] * 12
    assert not fake.refused
    assert max(sizes(fake)) / 4 <= budget_of(WINDOW)
    results = [b["messages"][-1]["content"] for b in fake.chats if b["messages"][-1]["role"] == "tool"]
    assert results == [FILE] * 12  # the file reached the model whole each time


async def test_an_endpoint_counting_more_tokens_than_estimated_never_has_to_refuse_a_request(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(FILE)
    fake.prompt_chars_per_token = 2  # a tokenizer denser than the estimate's 3 characters a token
    fake.max_request_chars = 2 * 3_600
    fake.responder = reads_then_answers
    async with running(AcpAgent(adapter(fake, window=3_600))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        stops = [(await editor.prompt(sid, f"turn {n}: read notes.txt"))["stopReason"] for n in range(6)]
    assert stops == ["end_turn"] * 6
    assert not fake.refused
    assert max(sizes(fake)) / 2 <= budget_of(3_600)  # the answer keeps its room, by the endpoint's own count


async def test_an_endpoint_counting_fewer_tokens_than_estimated_gets_more_of_the_conversation(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(FILE)
    fake.prompt_chars_per_token = 5
    fake.max_request_chars = 5 * WINDOW
    fake.responder = reads_then_answers
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        stops = [(await editor.prompt(sid, f"turn {n}: read notes.txt"))["stopReason"] for n in range(6)]
    assert stops == ["end_turn"] * 6
    assert not fake.refused
    assert max(sizes(fake)) > DEFAULT.chars(budget_of(WINDOW))


def test_a_nonsense_token_count_moves_the_estimate_only_within_sane_bounds():
    assert Estimate().calibrated(4_000, 1).measured == MAX_CHARS_PER_TOKEN
    assert Estimate().calibrated(4_000, 10**9).measured == MIN_CHARS_PER_TOKEN
    assert Estimate().calibrated(4_000, 0) == Estimate()
    assert Estimate().calibrated(4_000, 1_000).calibrated(2_000, 1_000).measured == 3.0  # smoothed
    assert Estimate(4.0).chars_per_token < 4.0  # taken a little lower than measured, on the safe side


async def test_a_prompt_that_cannot_fit_the_window_is_refused_with_a_clear_message_and_the_session_goes_on(
    fake, adapter, tmp_path
):
    (tmp_path / "notes.txt").write_text(FILE)
    fake.responder = reads_then_answers
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "please look at this: " + "z" * 9_000) == {"stopReason": "max_tokens"}
        said = editor.text(sid)
        assert said.startswith("This turn cannot go on: its prompt alone needs about ")
        assert "set context_window in [openai]" in said
        assert fake.chats == []
        assert (await editor.prompt(sid, "read notes.txt"))["stopReason"] == "end_turn"
    assert not fake.refused


@pytest.mark.parametrize("window", [WINDOW, 128_000])
async def test_the_system_message_and_tools_are_terse_on_a_small_window_only(fake, adapter, tmp_path, window):
    fake.max_request_chars = None
    fake.script(reply("Hi."))
    async with running(AcpAgent(adapter(fake, window=window))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "hello")
    body = fake.chats[0]
    described = ["description" in p for t in body["tools"] for p in t["function"]["parameters"]["properties"].values()]
    system = body["messages"][0]["content"]
    if window == WINDOW:
        assert system.startswith(TERSE_IDENTITY) and not any(described)
    else:
        assert system.startswith(IDENTITY) and all(described)


# --- planning what fits, without a model ------------------------------------------------------


def test_a_first_prompt_is_not_charged_the_room_of_a_summary_there_is_nothing_to_make():
    prompt = {"role": "user", "content": "p" * 2_900}  # about 1,000 tokens
    plan = context.plan([prompt], 0, room=1_100, reserve=200)
    assert plan == context.Plan(old=[], kept=[prompt], prompt_at=0)
    with pytest.raises(context.CannotFit):
        context.plan([{"role": "user", "content": "earlier"}, prompt], 1, room=1_100, reserve=200)


def test_the_newest_results_are_cut_longest_first_each_with_a_marker_to_fit_the_room():
    call = {"role": "assistant", "content": None, "tool_calls": []}
    short = {"role": "tool", "tool_call_id": "a", "content": "s" * 300}
    long = {"role": "tool", "tool_call_id": "b", "content": "l" * 6_000}
    fitted, cut = context.fit([call, short, long], 1_000, DEFAULT)
    assert cut == 1 and fitted[:2] == [call, short]
    kept = fitted[2]["content"].index("\n[...")
    assert fitted[2] == {**long, "content": "l" * kept + context.CUT_MARK.format(6_000 - kept)}
    assert DEFAULT.tokens(fitted) <= 1_000 and kept > 2_000
    assert context.fit([call, short], 1_000, DEFAULT) == ([call, short], 0)
