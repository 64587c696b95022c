"""What we answer: the results of the client's requests and the values inside them, as typed
named tuples, sent as `wire(result)`.

Built by us from values already checked, so nothing here validates: `wire` gives the JSON object
the peer reads (camelCase, a trailing `_` dropped, unset optional fields left out). They are not
pydantic models so that answering `initialize` and `session/new` does not load pydantic, which
takes longer than the rest of the start-up (docs/performance.md).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, cast


def wire(value: object) -> Any:
    """`value` as JSON: named tuples become objects, lists and tuples arrays, None fields go."""
    names: tuple[str, ...] | None = getattr(value, "_fields", None)
    if isinstance(value, tuple) and names is not None:
        items = cast("tuple[object, ...]", value)
        return {_camel(name): wire(item) for name, item in zip(names, items, strict=True) if item is not None}
    if isinstance(value, list | tuple):
        return [wire(item) for item in cast("list[object] | tuple[object, ...]", value)]
    return value


def _camel(name: str) -> str:
    first, *rest = name.rstrip("_").split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


class Offered(NamedTuple):
    """A capability that has nothing to say beyond being there: `{}`; also the empty result of
    authenticate, session/set_mode, session/close and session/delete."""


EMPTY = Offered()


class PromptCapabilities(NamedTuple):
    image: bool
    audio: bool
    embedded_context: bool


class McpCapabilities(NamedTuple):
    http: bool
    sse: bool


class SystemPromptModes(NamedTuple):
    override: Offered | None = None


class SystemPromptCapabilities(NamedTuple):
    """Unstable: `systemPrompt` taken at session/new, load, resume and fork (append always)."""

    mode: SystemPromptModes | None = None


class SessionCapabilities(NamedTuple):
    list_: Offered | None = None
    resume: Offered | None = None
    close: Offered | None = None
    delete: Offered | None = None
    additional_directories: Offered | None = None
    fork: Offered | None = None  # unstable: only with --unstable
    system_prompt: SystemPromptCapabilities | None = None  # unstable: only with --unstable


class AuthCapabilities(NamedTuple):
    logout: Offered | None = None


class AgentCapabilities(NamedTuple):
    load_session: bool
    prompt_capabilities: PromptCapabilities
    mcp_capabilities: McpCapabilities
    session_capabilities: SessionCapabilities
    auth: AuthCapabilities | None = None


class AuthMethod(NamedTuple):
    """`type` "terminal": the editor runs our command with `args` (and `env`) in a terminal."""

    id: str
    name: str
    description: str | None = None
    type: Literal["terminal"] | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


class Implementation(NamedTuple):
    name: str
    version: str
    title: str | None = None


class InitializeResult(NamedTuple):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    auth_methods: list[AuthMethod]
    agent_info: Implementation


class SessionMode(NamedTuple):
    id: str
    name: str
    description: str | None = None


class SessionModeState(NamedTuple):
    current_mode_id: str
    available_modes: list[SessionMode]


class SessionConfigChoice(NamedTuple):
    value: str
    name: str
    description: str | None = None


class SessionConfigOption(NamedTuple):
    """A config option: a `select` with its choices in display order, or (an agent below's,
    for a client that opted in) a `boolean` with no choices."""

    id: str
    name: str
    current_value: str | bool
    options: list[SessionConfigChoice] | None
    category: str | None = None
    description: str | None = None
    type: Literal["select", "boolean"] = "select"


class CommandInput(NamedTuple):
    hint: str


class AvailableCommand(NamedTuple):
    name: str
    description: str
    input: CommandInput | None = None


class NewSessionResult(NamedTuple):
    session_id: str
    modes: SessionModeState
    config_options: list[SessionConfigOption]


class SessionStateResult(NamedTuple):
    """What session/load and session/resume answer."""

    modes: SessionModeState
    config_options: list[SessionConfigOption]


class SetConfigOptionResult(NamedTuple):
    config_options: list[SessionConfigOption]


class SessionInfo(NamedTuple):
    session_id: str
    cwd: str
    updated_at: str | None = None
    title: str | None = None
    additional_directories: list[str] | None = None


class ListSessionsResult(NamedTuple):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class Usage(NamedTuple):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_read_tokens: int | None = None


class PromptResult(NamedTuple):
    stop_reason: str
    usage: Usage | None = None  # only the unstable schema has it; stable clients ignore it
