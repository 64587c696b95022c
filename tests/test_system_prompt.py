"""A client's `systemPrompt` (ACP unstable, `--unstable`) honoured by the openai agent: the fake
endpoint on 127.0.0.1 records each request, whose system message carries the client's text after
ours (append) or in place of our built-in instructions (override); the session keeps it across a
restart. Without the switch it is ignored and not advertised, as a stable server does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from harness import FakeEditor, RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.rpc.errors import INVALID_PARAMS
from adapters.openai import OpenAIAdapter
from adapters.openai.prefix import GUIDANCE, IDENTITY
from journal.store import Journal

EXTRA = "Answer in French."


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["gpt-4o"]) as server:
        yield server


def openai_agent(fake: FakeOpenAI, root: Path, journal: Journal, *, unstable: bool = True) -> AcpAgent:
    env = {"XDG_CONFIG_HOME": str(root / "config")}
    adapter = OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-test")
    return AcpAgent(adapter, AgentOptions(unstable=unstable), journal=journal)


def system_prompt(mode: str, text: str = EXTRA) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


async def new_session(editor: FakeEditor, cwd: Path, prompt: dict[str, Any] | None) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if prompt is not None:
        params["systemPrompt"] = prompt
    return (await editor.request("session/new", params))["sessionId"]


def system_of(request: dict[str, Any]) -> str:
    [system] = [m["content"] for m in request["messages"] if m["role"] == "system"][:1]
    return system


async def test_initialize_offers_append_and_override_only_with_the_switch(fake, tmp_path):
    async with await Journal.open(tmp_path / "j.db") as journal:
        async with running(openai_agent(fake, tmp_path, journal)) as on:
            offered = (await on.initialize())["agentCapabilities"]["sessionCapabilities"]
        async with running(openai_agent(fake, tmp_path, journal, unstable=False)) as off:
            stable = (await off.initialize())["agentCapabilities"]["sessionCapabilities"]
    assert offered["systemPrompt"] == {"mode": {"override": {}}}
    assert "systemPrompt" not in stable


async def test_an_appended_system_prompt_follows_ours_in_every_request_and_survives_a_restart(fake, tmp_path):
    fake.script(reply("Bonjour."), reply("Encore."))
    db = tmp_path / "j.db"
    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as editor:
        await editor.initialize()
        sid = await new_session(editor, tmp_path, system_prompt("append"))
        await editor.prompt(sid, "hello")
    first = system_of(fake.chats[0])
    assert first.startswith(IDENTITY) and first.endswith(f"\n\n{EXTRA}")

    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        await again.prompt(sid, "again")
    assert system_of(fake.chats[1]) == first


async def test_an_override_replaces_our_instructions_but_keeps_the_context(fake, tmp_path):
    fake.script(reply("Oui."))
    async with (
        await Journal.open(tmp_path / "j.db") as journal,
        running(openai_agent(fake, tmp_path, journal)) as editor,
    ):
        await editor.initialize()
        sid = await new_session(editor, tmp_path, system_prompt("override", "You are a pirate."))
        await editor.prompt(sid, "hello")
    system = system_of(fake.chats[0])
    assert system.startswith("You are a pirate.\n\nWorking directory: ")
    assert IDENTITY not in system and GUIDANCE not in system
    assert str(tmp_path) in system


async def test_a_load_with_another_system_prompt_replaces_the_stored_one(fake, tmp_path):
    fake.script(reply("One."), reply("Two."))
    db = tmp_path / "j.db"
    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as editor:
        await editor.initialize()
        sid = await new_session(editor, tmp_path, system_prompt("append"))
        await editor.prompt(sid, "hello")
    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as again:
        await again.initialize()
        params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [], "systemPrompt": system_prompt("override")}
        await again.request("session/resume", params)
        await again.prompt(sid, "again")
    assert system_of(fake.chats[1]).startswith(f"{EXTRA}\n\nWorking directory: ")


@pytest.mark.parametrize(
    ("prompt", "field"),
    [
        ({"mode": "shout", "content": [{"type": "text", "text": "x"}]}, "systemPrompt.mode"),
        ({"mode": "append", "content": []}, "systemPrompt.content"),
        (
            {"mode": "append", "content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
            "systemPrompt.content.0",
        ),
    ],
)
async def test_a_system_prompt_the_agent_cannot_apply_is_refused_and_no_session_is_made(fake, tmp_path, prompt, field):
    async with (
        await Journal.open(tmp_path / "j.db") as journal,
        running(openai_agent(fake, tmp_path, journal)) as editor,
    ):
        await editor.initialize()
        with pytest.raises(RemoteError) as refused:
            await new_session(editor, tmp_path, prompt)
        sessions, _ = await journal.list_sessions()
    assert refused.value.code == INVALID_PARAMS
    assert field in str(refused.value.data)
    assert sessions == []


async def test_without_the_switch_a_system_prompt_is_ignored_as_before(fake, tmp_path):
    fake.script(reply("Hi."))
    agent = openai_agent(fake, tmp_path, await Journal.open(tmp_path / "j.db"), unstable=False)
    async with running(agent) as editor:
        await editor.initialize()
        sid = await new_session(editor, tmp_path, system_prompt("append"))
        await editor.prompt(sid, "hello")
    assert agent.journal is not None
    await agent.journal.close()
    assert EXTRA not in system_of(fake.chats[0])


def test_hermes_takes_an_appended_system_prompt_in_its_requests_and_offers_no_override(tmp_path, monkeypatch):
    pytest.importorskip("run_agent", reason="the hermes extra is not installed")
    from hermes_home import hermes_model

    from adapters.base import SystemPrompt
    from adapters.hermes import HermesAdapter
    from adapters.testing import run_turn

    workspace = tmp_path / "project"
    workspace.mkdir()
    with hermes_model(tmp_path, monkeypatch) as model:
        model.script(reply("Bonjour."), reply("Hi."))
        adapter = HermesAdapter(warm=False)
        caps = adapter.capabilities()
        for prompt in (SystemPrompt(EXTRA), None):
            run_turn(adapter, "hello", cwd=str(workspace), session_id="s1", timeout=30, system_prompt=prompt)
        told, plain = (
            "\n".join(m["content"] for m in body["messages"] if m["role"] == "system") for body in model.chats
        )
    assert (caps.system_prompt, caps.system_prompt_override) == (True, False)
    assert EXTRA in told
    assert EXTRA not in plain  # never stored: a turn without it is sent without it
