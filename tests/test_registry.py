"""The registry: built-in names, installed entry points (a real dist-info on sys.path, read by
the real importlib.metadata), `module:factory` paths, plain run functions, and clear errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from adapters import registry
from adapters.callable import CallableAdapter
from adapters.echo import EchoAdapter
from adapters.registry import ENTRY_POINT_GROUP, agent_specs, create_adapter, known_agents
from adapters.scripted import ScriptedAdapter
from adapters.testing import run_turn

AGENT_MODULE = """
from adapters.base import AdapterCapabilities
from adapters.callable import SimpleAdapter


class Agent(SimpleAdapter):
    name = "third-party"

    def __init__(self, greeting="hi", script=None):
        self.greeting, self.script = greeting, script

    def run_turn(self, turn, sink):
        sink.text(f"{self.greeting}: {turn.text}")
        return "end_turn"


def make_agent(script=None):
    return Agent("made", script)


def make_runner():
    return run


def run(prompt, session):
    return f"ran {prompt} in {session.cwd}"


def make_nothing():
    return 42


def make_broken():
    raise RuntimeError("no connection")


class HalfAnAgent:
    name = "half"

    def run_turn(self, turn, sink):
        return "end_turn"


half = HalfAnAgent()
"""


class Packages:
    """A directory on sys.path where a test writes modules and installs distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = f"regtest_{uuid.uuid4().hex[:8]}"

    def module(self, source: str = AGENT_MODULE, name: str = "agents") -> str:
        module = f"{self.prefix}_{name}"
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        return module

    def install(self, dist: str, entry_points: dict[str, str]) -> None:
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    packages = Packages(root)
    yield packages
    for name in [m for m in sys.modules if m.startswith(packages.prefix)]:
        del sys.modules[name]


def say(adapter, prompt: str = "ping") -> str:
    return run_turn(adapter, prompt, cwd="/somewhere").text


# --- names ---------------------------------------------------------------------------------


def test_the_builtin_names_come_first_and_need_no_installation():
    assert known_agents()[:4] == ("echo", "scripted", "python", "openai")
    assert isinstance(create_adapter("echo"), EchoAdapter)


def test_the_scripted_agent_gets_its_scenario_file_from_the_script_setting(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text('{"scenarios": [], "contextWindow": 10}')
    scripted = create_adapter("scripted", script=str(path))
    assert isinstance(scripted, ScriptedAdapter)
    assert scripted.capabilities().context_window == 10


def test_a_setting_left_as_none_is_not_given():
    assert isinstance(create_adapter("echo", script=None), EchoAdapter)


def test_the_openai_agent_is_imported_only_when_it_is_asked_for():
    code = (
        "import sys; from adapters.registry import known_agents, create_adapter; known_agents(); "
        "create_adapter('echo'); print('adapters.openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- entry points ----------------------------------------------------------------------------


def test_an_installed_entry_point_makes_its_name_an_agent(packages: Packages):
    module = packages.module()
    packages.install("some-agent-acp", {"some-agent": f"{module}:make_agent"})
    assert "some-agent" in known_agents()
    spec = next(s for s in agent_specs() if s.name == "some-agent")
    assert (spec.target, spec.origin) == (f"{module}:make_agent", "entry point of some-agent-acp")
    assert say(create_adapter("some-agent")) == "made: ping"


def test_an_entry_point_may_name_a_class_or_a_run_function(packages: Packages):
    module = packages.module()
    packages.install("two-agents-acp", {"by-class": f"{module}:Agent", "by-function": f"{module}:run"})
    assert say(create_adapter("by-class", script="x")) == "hi: ping"
    assert say(create_adapter("by-function")) == "ran ping in /somewhere"


def test_an_entry_point_cannot_take_a_builtin_name(packages: Packages):
    module = packages.module()
    packages.install("impostor-acp", {"echo": f"{module}:make_agent"})
    assert known_agents().count("echo") == 1
    assert isinstance(create_adapter("echo"), EchoAdapter)


# --- module:factory ----------------------------------------------------------------------------


def test_a_module_factory_path_builds_what_the_factory_returns(packages: Packages):
    module = packages.module()
    adapter = create_adapter(f"{module}:make_agent", script="scenarios.json")
    assert (adapter.name, adapter.script) == ("third-party", "scenarios.json")


def test_a_class_is_called_with_only_the_settings_it_accepts(packages: Packages):
    module = packages.module()
    assert create_adapter(f"{module}:Agent").greeting == "hi"
    with pytest.raises(ValueError, match=r"^a script applies only to the scripted agent"):
        create_adapter(f"{module}:make_runner", script="x")


def test_a_module_in_the_current_directory_loads_without_being_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    here = tmp_path / "project"
    here.mkdir()
    module = f"cwdmod_{uuid.uuid4().hex[:8]}"
    (here / f"{module}.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(here))])
    try:
        assert say(create_adapter(f"{module}:make_agent")) == "made: ping"
    finally:
        sys.modules.pop(module, None)


def test_a_plain_run_function_is_wrapped_as_the_python_agent(packages: Packages):
    module = packages.module()
    adapter = create_adapter(f"{module}:run")
    assert isinstance(adapter, CallableAdapter)
    assert say(adapter) == "ran ping in /somewhere"


def test_a_factory_that_returns_a_run_function_is_wrapped_too(packages: Packages):
    module = packages.module()
    assert say(create_adapter(f"{module}:make_runner")) == "ran ping in /somewhere"


def test_the_python_agent_calls_the_function_its_script_names(packages: Packages):
    module = packages.module()
    adapter = create_adapter("python", script=f"{module}:run")
    assert isinstance(adapter, CallableAdapter)
    assert say(adapter) == "ran ping in /somewhere"
    assert adapter.health().detail == f"calls {module}:run"


# --- clear errors ------------------------------------------------------------------------------


def test_an_unknown_name_lists_every_known_agent_including_installed_ones(packages: Packages):
    packages.install("extra-acp", {"extra": f"{packages.module()}:make_agent"})
    with pytest.raises(
        ValueError,
        match=r"^unknown agent 'cursor'; known agents: echo, scripted, python, "
        r"openai, .*extra.* \(or give module:factory\)$",
    ):
        create_adapter("cursor")


def test_a_module_that_does_not_exist_is_named():
    with pytest.raises(ValueError, match=r"^agent 'no_such_module_xyz:make': no module named 'no_such_module_xyz'$"):
        create_adapter("no_such_module_xyz:make")


def test_a_missing_attribute_is_named(packages: Packages):
    module = packages.module()
    with pytest.raises(ValueError, match=f"^agent '{module}:nope': module '{module}' has no attribute 'nope'$"):
        create_adapter(f"{module}:nope")


def test_a_missing_optional_dependency_says_what_to_install(packages: Packages):
    module = packages.module("import httpx_but_not_installed_xyz\n\ndef make():\n    return None\n", "needy")
    packages.install("needy-acp", {"needy": f"{module}:make"})
    with pytest.raises(
        ValueError,
        match=r"^agent 'needy' needs the Python package 'httpx_but_not_installed_xyz', "
        r"which is not installed \(pip install httpx_but_not_installed_xyz\)$",
    ):
        create_adapter("needy")


def test_a_builtin_missing_a_dependency_names_its_extra(packages: Packages, monkeypatch: pytest.MonkeyPatch):
    module = packages.module("import httpx_but_not_installed_xyz\n", "builtin")
    monkeypatch.setattr(registry, "BUILTINS", {**registry.BUILTINS, "heavy": f"{module}:Agent"})
    monkeypatch.setattr(registry, "EXTRAS", {"heavy": "heavy"})
    monkeypatch.chdir(Path(registry.__file__).resolve().parent.parent)  # this clone: an editable install
    with pytest.raises(
        ValueError,
        match=r"^agent 'heavy' needs the Python package 'httpx_but_not_installed_xyz', "
        r"which is not installed \(pip install -e '\.\[heavy\]'\)$",
    ):
        create_adapter("heavy")


def test_a_module_that_fails_to_import_says_why(packages: Packages):
    module = packages.module("raise RuntimeError('bad config at import')\n", "explodes")
    with pytest.raises(ValueError, match=f"importing '{module}' failed: RuntimeError: bad config at import$"):
        create_adapter(f"{module}:make")


def test_a_factory_that_returns_something_else_is_not_an_adapter(packages: Packages):
    module = packages.module()
    with pytest.raises(ValueError, match=r":make_nothing': the factory returned 42 \(int\), which is neither"):
        create_adapter(f"{module}:make_nothing")


def test_an_object_missing_adapter_methods_names_them_and_the_base_class(packages: Packages):
    module = packages.module()
    with pytest.raises(ValueError, match=r"^agent '[a-z_0-9]+:half' is HalfAnAgent, which is neither") as caught:
        create_adapter(f"{module}:half")
    assert "capabilities, cancel" in str(caught.value) and "SimpleAdapter" in str(caught.value)


def test_a_factory_that_raises_is_reported_with_its_error(packages: Packages):
    module = packages.module()
    with pytest.raises(ValueError, match=r":make_broken': the factory failed: RuntimeError: no connection$"):
        create_adapter(f"{module}:make_broken")


def test_the_python_agent_without_a_script_says_how_to_name_the_function():
    with pytest.raises(ValueError, match=r"^the python agent needs --script module:function"):
        create_adapter("python")


def test_a_script_for_the_echo_agent_is_refused():
    with pytest.raises(ValueError, match=r"not 'echo'$"):
        create_adapter("echo", script="s.json")


def test_a_path_without_an_attribute_is_refused():
    with pytest.raises(ValueError, match="is not of the form module:factory"):
        create_adapter("examples.my_agent:")
