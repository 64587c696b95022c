"""The method table in acp_server/protocol/methods.py against the vendored schema's meta.json:
every name is a real ACP method on the side the table puts it, and the server registers
handlers only for agent methods from that table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.protocol import methods
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

META = json.loads((Path(__file__).resolve().parent.parent / "schema" / "meta.json").read_text())
UNSTABLE_META = json.loads((Path(__file__).resolve().parent.parent / "schema" / "meta.unstable.json").read_text())
SCHEMA_AGENT_METHODS = frozenset(META["agentMethods"].values())
SCHEMA_UNSTABLE_AGENT_METHODS = frozenset(UNSTABLE_META["agentMethods"].values()) - SCHEMA_AGENT_METHODS
SCHEMA_CLIENT_METHODS = frozenset(META["clientMethods"].values())
V2_SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "schema" / "v2" / "schema.json").read_text())
V2_SCHEMA_AGENT_METHODS = frozenset(
    d["x-method"] for d in V2_SCHEMA["$defs"].values() if d.get("x-side") == "agent" and "x-method" in d
)
SCRIPT = {"scenarios": [{"match": "", "steps": [{"say": "ok"}]}]}


def constants() -> dict[str, str]:
    return {name: value for name, value in vars(methods).items() if name.isupper() and isinstance(value, str)}


@pytest.mark.parametrize(("name", "value"), sorted(constants().items()))
def test_every_method_constant_is_a_method_of_the_schema_on_the_side_the_table_gives_it(name, value):
    if value in methods.V2_AGENT_METHODS:
        assert value in V2_SCHEMA_AGENT_METHODS, f"{name} = {value!r} is not an agent method of schema/v2"
    if value in methods.V2_AGENT_METHODS - methods.AGENT_METHODS:
        return  # v2's alone (auth/login, auth/logout)
    tables = (
        ("agent", methods.AGENT_METHODS, SCHEMA_AGENT_METHODS),
        ("unstable agent", methods.UNSTABLE_AGENT_METHODS, SCHEMA_UNSTABLE_AGENT_METHODS),
        ("client", methods.CLIENT_METHODS, SCHEMA_CLIENT_METHODS),
    )
    sides = [(side, schema_side) for side, table, schema_side in tables if value in table]
    assert len(sides) == 1, f"{name} must be in exactly one of AGENT_METHODS, UNSTABLE_AGENT_METHODS, CLIENT_METHODS"
    side, schema_side = sides[0]
    assert value in schema_side, f"{name} = {value!r} is not an {side} method of schema/meta*.json"


def test_the_side_tables_hold_only_the_constants():
    assert set(constants().values()) == (
        methods.AGENT_METHODS | methods.UNSTABLE_AGENT_METHODS | methods.CLIENT_METHODS | methods.V2_AGENT_METHODS
    )


async def test_the_server_registers_handlers_only_for_agent_methods_of_the_table(tmp_path):
    journal = await Journal.open(tmp_path / "j.db")
    try:
        with_journal = AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal).handlers()
    finally:
        await journal.close()
    without = AcpAgent(ScriptedAdapter.from_data(SCRIPT)).handlers()
    assert set(without) < set(with_journal) == methods.AGENT_METHODS | methods.V2_AGENT_METHODS
    assert methods.AGENT_METHODS <= SCHEMA_AGENT_METHODS


async def test_the_unstable_methods_are_served_only_with_the_unstable_switch(tmp_path):
    journal = await Journal.open(tmp_path / "j.db")
    try:
        stable = AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal).handlers()
        unstable = AcpAgent(ScriptedAdapter.from_data(SCRIPT), AgentOptions(unstable=True), journal=journal).handlers()
    finally:
        await journal.close()
    assert set(stable) == methods.AGENT_METHODS | methods.V2_AGENT_METHODS
    assert set(unstable) == methods.AGENT_METHODS | methods.V2_AGENT_METHODS | methods.UNSTABLE_AGENT_METHODS
