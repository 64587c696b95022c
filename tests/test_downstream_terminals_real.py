"""The real fast-agent (`--shell`) below acp-server runs its shell command in the terminal
acp-server offers it: one permission question (its own, about the command), the command run
locally in the session's cwd by acp-server, its output back to the model. Skips where
fast-agent is not installed (installed under CI or with ACP_TEST_DOWNLOADS=1: tests/agents.py)."""

from __future__ import annotations

from pathlib import Path

import fake_openai
from acp_child import Runtimes
from agents import REAL_AGENTS
from harness import answer_permissions, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods

LINE = "printf 'hello from the terminal\\n' > made.txt"


async def test_fast_agent_runs_its_command_in_the_terminal_acp_server_offers(tmp_path: Path, monkeypatch) -> None:
    agent = REAL_AGENTS["fast-agent"]
    monkeypatch.chdir(tmp_path)  # the agent starts in our cwd, and fast-agent writes .fast-agent/ there
    runtimes = Runtimes()
    with agent.endpoint() as fake:
        launch = agent.launch(tmp_path, fake.base_url)
        for name, value in launch.env.items():
            monkeypatch.setenv(name, value)
        fake.script(fake_openai.reply(tools=[("execute", {"command": LINE})]), fake_openai.reply("Done."))
        try:
            async with running(AcpAgent(runtimes.make(tuple(launch.command)))) as editor:
                editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once", "allow_once")
                await editor.initialize()
                sid = await editor.new_session(launch.cwd)
                await editor.prompt(sid, "Make the file.")
        finally:
            runtimes.close()
        results = [body for body in fake.model_requests if agent.is_tool_result(body)]
    asked = [f["params"] for f in editor.server_requests if f["method"] == methods.REQUEST_PERMISSION]
    (question,) = asked  # fast-agent's own, about the command: the terminal it then opened is that call
    assert question["toolCall"]["rawInput"] == {"command": LINE}
    assert (Path(launch.cwd) / "made.txt").read_text() == "hello from the terminal\n"
    assert results, "the command's result never reached the model"
    ours = [u for u in editor.updates[sid] if u.get("rawOutput") == {"exitCode": 0, "signal": None}]
    assert [u["toolCallId"] for u in ours] == [question["toolCall"]["toolCallId"]]  # run by acp-server
