"""The ACP Registry entry in registry/: valid against the registry's vendored agent.schema.json,
and following its other rules: the id is the directory's name, the version is the package's and
pinned in the `uvx` package, `uvx` finds the command the package is named after, and the icon is
a square 16x16 SVG drawn in `currentColor` alone."""

from __future__ import annotations

import json
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from jsonschema import Draft7Validator, FormatChecker

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "registry"
ENTRY = REGISTRY / "acp-server"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PAINT = {"currentcolor", "none", "inherit"}  # the only fill and stroke values the registry takes
SVG = "{http://www.w3.org/2000/svg}"


def entry() -> dict:
    return json.loads((ENTRY / "agent.json").read_text())


def icon_problems(text: str) -> list[str]:
    """What the registry would refuse in an icon: its size, its shape, any colour but currentColor."""
    root = ET.fromstring(text)
    problems = [] if root.tag == f"{SVG}svg" else [f"the root element is {root.tag}, not svg"]
    width, height = root.get("width"), root.get("height")
    if width is None or height is None:
        box = (root.get("viewBox") or "").split()
        width, height = (box[2], box[3]) if len(box) == 4 else (None, None)
    if width is None or height is None:
        problems.append("it has neither width and height nor a viewBox")
    elif (float(width), float(height)) != (16, 16):
        problems.append(f"it is {width}x{height}, not 16x16")
    used_current = False
    for element in root.iter():
        paints = {name: element.get(name) for name in ("fill", "stroke")}
        for declaration in (element.get("style") or "").split(";"):
            name, _, value = declaration.partition(":")
            if name.strip() in ("fill", "stroke"):
                paints[name.strip()] = value.strip()
        for name, value in paints.items():
            if value is None:
                continue
            if value.strip().lower() not in PAINT:
                problems.append(f"{element.tag.removeprefix(SVG)} has {name} {value!r}")
            used_current |= value.strip().lower() == "currentcolor"
    if not used_current:
        problems.append("it never uses currentColor (an icon without a fill is drawn black)")
    return problems


def test_the_entry_is_valid_against_the_registry_schema():
    schema = json.loads((REGISTRY / "agent.schema.json").read_text())
    Draft7Validator.check_schema(schema)
    errors = [e.message for e in Draft7Validator(schema, format_checker=FormatChecker()).iter_errors(entry())]
    assert errors == []
    assert schema["$id"] == "https://cdn.agentclientprotocol.com/registry/v1/latest/agent.schema.json"


def test_the_schema_rejects_what_the_registry_rejects():
    """The vendored schema is the real one: a broken entry does not pass it."""
    schema = json.loads((REGISTRY / "agent.schema.json").read_text())
    broken = {**entry(), "id": "ACP Server", "distribution": {"pip": {"package": "acp-server"}}}
    assert len(list(Draft7Validator(schema).iter_errors(broken))) == 2


def test_the_id_is_the_directory_and_the_version_is_the_package_pinned():
    agent = entry()
    assert agent["id"] == ENTRY.name
    assert agent["version"] == PROJECT["version"]
    package = agent["distribution"]["uvx"]["package"]
    assert package == f"{PROJECT['name']}=={PROJECT['version']}"
    assert PROJECT["name"] in PROJECT["scripts"]  # `uvx acp-server` runs the command named as the package
    assert agent["license"] == PROJECT["license"]["text"]
    assert agent["icon"] == "./icon.svg" and (ENTRY / "icon.svg").is_file()


def test_the_icon_is_16_by_16_and_drawn_in_current_color_alone():
    assert icon_problems((ENTRY / "icon.svg").read_text()) == []


@pytest.mark.parametrize(
    ("svg", "problem"),
    [
        ('<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24"><path fill="currentColor"/></svg>', "24x24"),
        ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path fill="#f00"/></svg>', "fill '#f00'"),
        (
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path style="stroke: red"/></svg>',
            "stroke 'red'",
        ),
        ('<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><path d="M0 0"/></svg>', "never uses"),
    ],
)
def test_the_icon_check_finds_what_the_registry_refuses(svg, problem):
    assert any(problem in found for found in icon_problems(svg)), icon_problems(svg)


def test_the_readme_names_the_commit_the_schema_came_from():
    readme = (REGISTRY / "README.md").read_text()
    assert re.search(r"agentclientprotocol/registry.*\n?.*commit `[0-9a-f]{40}`", readme)
