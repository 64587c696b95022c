"""The front door and the docs: every relative link in README.md and editor-configs/README.md
leads to a file that exists, and every page under docs/ is in mkdocs.yml's navigation (CI also
builds the site with `mkdocs build --strict`, which checks links between pages and headings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", ["README.md", "editor-configs/README.md"])
def test_every_relative_link_leads_to_a_file_that_exists(page: str) -> None:
    source = REPO / page
    targets = [t.split("#", 1)[0] for t in LINK.findall(source.read_text()) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if t and not (source.parent / t).exists()]
    assert targets and missing == []


def test_every_docs_page_is_in_the_sites_navigation_and_every_entry_is_a_page() -> None:
    nav = set(re.findall(r":\s*(\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert nav == pages


def test_the_readme_gives_the_demo_and_the_test_command_that_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    test_command = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
    assert test_command in readme
    assert test_command in (REPO / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/acp-server prompt" in readme


def test_the_readmes_zed_snippet_holds_the_zed_files_first_entry_and_its_claude_entry_as_written() -> None:
    import json

    readme = (REPO / "README.md").read_text()
    [block] = re.findall(r"```json\n(.*?)```", readme, re.S)
    shown = json.loads(block)["agent_servers"]
    held = json.loads((REPO / "editor-configs" / "zed-settings.json").read_text())["agent_servers"]
    assert list(shown) == [next(iter(held)), "acp-server (claude)"]
    assert all(entry == held[name] for name, entry in shown.items())


def test_the_readme_says_what_the_test_suite_needs_and_how_to_let_it_download() -> None:
    readme = (REPO / "README.md").read_text()
    assert "ACP_TEST_DOWNLOADS=1" in readme and "about 1 GB" in readme and "Node.js >= 20" in readme
    assert 'export CI="${CI:-true}"' in (REPO / ".ci" / "run").read_text()


def test_the_doctor_sample_in_the_cli_page_lists_every_agent_and_every_server_option() -> None:
    from acp_server.cli.settings import SERVER_OPTIONS
    from adapters.registry import agent_specs

    page = (REPO / "docs" / "cli.md").read_text()
    sample = page[page.index("$ ACP_SERVER_AGENT=scripted acp-server doctor") :].split("```")[0]
    agents_part, settings_part = sample.split("Settings in effect for scripted")
    rows = [line[2:].split()[0] for line in agents_part.splitlines()[2:] if line[:2] in ("  ", "> ") and line[2:]]
    assert rows[1:] == [spec.name for spec in agent_specs()]  # after the AGENT header
    settings = [line.split()[0] for line in settings_part.splitlines()[2:] if line.startswith("  ")]
    assert settings == [flag.lstrip("-") for flag, _ in SERVER_OPTIONS]


def test_the_docs_extra_pins_markdown_as_hermes_agent_does_so_the_extras_install_together() -> None:
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    try:
        hermes = requires("hermes-agent") or []
    except PackageNotFoundError:
        pytest.skip("hermes-agent is not installed here (Python >= 3.14, or no test extra)")
    pinned = {r.split(";")[0].replace(" ", "") for r in hermes if r.lower().startswith("markdown")}
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    docs = {r.split(";")[0].replace(" ", "") for r in extras["docs"] if r.lower().startswith("markdown")}
    assert pinned and {p.lower() for p in pinned} == {d.lower() for d in docs}
