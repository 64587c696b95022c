"""The contract between the server and a synchronous agent runtime.

An adapter's `run_turn` runs in a worker thread. It reports through a `Sink` (text, thoughts,
tool calls, plans, usage, title) and asks through the sink's blocking calls (permission,
file read/write, command). Once the turn is cancelled, every sink call raises
`TurnCancelled`, so an agent that keeps using its sink stops at its next report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Protocol, runtime_checkable

from adapters.events import (
    CompactionStatus,
    NoticeSeverity,
    PlanEntry,
    StopReason,
    ToolContent,
    ToolKind,
    ToolLocation,
    ToolStatus,
    TranscriptSaved,
)
from adapters.frozen import frozen


class TurnCancelled(Exception):
    """Raised inside a worker by any sink call once its turn has been cancelled."""


class AgentError(Exception):
    """An error the agent wants the user to see as is (no traceback, no internals)."""


class AuthRequired(AgentError):
    """The agent needs the user to authenticate first (ACP's `auth_required`, -32000)."""


@frozen
class Message:
    """One message of an earlier conversation, handed to a restored session's turns."""

    role: Literal["user", "agent"]
    text: str


@frozen
class Transcript:
    """What `Sink.save_transcript` kept. `format` names the messages' shape (an agent ignores a
    transcript of another format and uses the plain history). `since` holds, as plain messages,
    the turns after the last save (a turn cut off before it saved, a built-in command's answer):
    the agent adds them, in its own format, to what it saves next."""

    format: str
    messages: tuple[Any, ...] = ()
    since: tuple[Message, ...] = ()


@frozen
class EditorFeatures:
    """What the editor advertised that an agent itself must respect: the session updates it can
    show (ACP `session.compaction`, `session.notices`). File and terminal routing is the sink's."""

    compaction: bool = False
    notices: bool = False


class SessionNotes(Protocol):
    """What an agent may tell the editor about a session outside its turns, such as a title its
    model names after a turn has ended. Callable from any thread but the server's event loop,
    while the session is open; dropped once the session is closed or the server has stopped."""

    def title(self, title: str) -> None: ...


class _NoNotes:
    """Where notes go when nobody listens (an adapter driven without a server)."""

    def title(self, title: str) -> None:
        pass


NO_NOTES: SessionNotes = _NoNotes()


@frozen
class SystemPrompt:
    """A client's system-level instructions for a session: added to the agent's own (append),
    or in place of its built-in ones (`override`); the tools and the context stay."""

    text: str
    override: bool = False


@frozen
class TurnInput:
    session_id: str
    cwd: str
    prompt: tuple[dict[str, Any], ...]
    history: tuple[Message, ...] = ()
    mode: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict[str, Any])
    mcp_servers: tuple[dict[str, Any], ...] = ()
    additional_directories: tuple[str, ...] = ()  # more workspace roots besides cwd
    transcript: Transcript | None = None  # the agent's own saved transcript, if it saved one
    editor: EditorFeatures = field(default_factory=EditorFeatures)
    notes: SessionNotes = NO_NOTES  # outlives the turn: for what the agent learns later
    origin: str | None = None  # None: the user's prompt; else a follow-up the agent asked for (`Sink.follow_up`)
    state: Mapping[str, Any] = field(default_factory=dict[str, Any])  # what `Sink.save_state` kept, by key
    system_prompt: SystemPrompt | None = None  # the client's instructions for the session (ACP unstable)

    @property
    def text(self) -> str:
        """The prompt as plain text: text blocks and the text of embedded resources."""
        parts: list[str] = []
        for block in self.prompt:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "resource_link":
                parts.append(block["uri"])
            elif block.get("type") == "resource" and "text" in block.get("resource", {}):
                parts.append(block["resource"]["text"])
        return "\n".join(parts)


@frozen
class PermissionDecision:
    allowed: bool
    remember: bool = False
    cancelled: bool = False
    reason: str | None = None


@frozen
class CommandResult:
    output: str
    exit_code: int | None
    signal: str | None = None
    truncated: bool = False
    terminal_id: str | None = None
    stopped: bool = False  # a client stopped it (ACP v2's tool_call/cancel), not the command itself


class ToolRefused(Exception):
    """A file or command operation the server would not perform (path outside the workspace,
    client error, timeout). Its message is safe to show to the user."""


@runtime_checkable
class Sink(Protocol):
    """How a running turn talks back. Reports return at once; asks block until answered."""

    @property
    def cancelled(self) -> bool: ...

    def check_cancelled(self) -> None: ...
    def sleep(self, seconds: float) -> None: ...
    def text(self, text: str, *, message_id: str | None = None) -> None:
        """Stream a piece of the reply; `message_id` is an agent below's own id for its message."""
        ...

    def thought(self, text: str, *, message_id: str | None = None) -> None: ...

    def tool_call(
        self,
        title: str,
        *,
        kind: ToolKind = "other",
        name: str | None = None,
        raw_input: Any = None,
        locations: Sequence[ToolLocation] = (),
        tool_call_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a visible tool call; `tool_call_id` keeps the runtime's own id (unique within
        the turn; a missing or repeated one gets a fresh id). Returns the id used. `extra`: an
        agent below's fields we do not know (`_meta`, a vendor's), shown to the editor as they came."""
        ...

    def tool_update(
        self,
        tool_call_id: str,
        *,
        status: ToolStatus | None = None,
        title: str | None = None,
        content: Sequence[ToolContent] | None = None,
        raw_output: Any = None,
        kind: ToolKind | None = None,
        raw_input: Any = None,
        locations: Sequence[ToolLocation] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Change a started tool call; None leaves a field as it was. Once a permission question
        named the call, its title, kind and input stay as they were decided on."""
        ...

    def plan(
        self, entries: Sequence[PlanEntry], *, plan_id: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        """The plan, whole (no entries: gone); `plan_id` names one of several (an agent below's)."""
        ...

    def usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        context_used: int | None = None,
        context_size: int | None = None,
        cached_read_tokens: int | None = None,
    ) -> None: ...

    def title(self, title: str) -> None: ...
    def save_transcript(self, format: str, messages: Sequence[Any], *, base: bool = False) -> None:
        """Keep messages of the agent's own transcript in the journal (see `TurnInput.transcript`)."""
        ...

    def save_state(self, key: str, value: Any) -> None:
        """Keep a JSON value with the session in the journal; the latest of each key comes back
        in `TurnInput.state` (after a restart too). Journal-only: the editor is not shown it."""
        ...

    def follow_up(self, prompt: str, *, origin: str) -> None:
        """Ask for one more turn of this session once this one has ended well, with `prompt` sent
        in the agent's name (`origin` says what for, e.g. "goal"). It is a turn like any other (a
        run in the journal, its prompt marked with `origin` and shown to the editor), run within
        the `session/prompt` still open when nothing else waits in the session's queue (a prompt
        sent meanwhile goes first). The agent's next turn replaces it (by asking again) or drops
        it (by not asking); a cancel drops it and calls the adapter's `cancel`."""
        ...

    def compaction(
        self, compaction_id: str, status: CompactionStatus, *, summary: str | None = None, error: str | None = None
    ) -> None:
        """Show a context compaction (only when `TurnInput.editor.compaction`)."""
        ...

    def compaction_chunk(self, compaction_id: str, text: str) -> None: ...

    def notice(self, title: str, *, severity: NoticeSeverity = "info", description: str | None = None) -> None:
        """Tell the user something outside the conversation (only when `TurnInput.editor.notices`)."""
        ...

    def request_permission(self, tool_call_id: str, *, offered: Collection[str] | None = None) -> PermissionDecision:
        """Decide on a call (the policy, else the user); `offered`: the only option kinds that can
        be honoured (an ACP agent below offers no `allow_once`, say), None for all four."""
        ...

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str: ...
    def write_text_file(self, path: str, content: str) -> None: ...

    def run_command(
        self,
        command: str,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,
        stoppable: Callable[[Callable[[], object]], None] | None = None,
    ) -> CommandResult:
        """Run a command (as its tool call's permission allowed it). `stoppable`, when given, is
        called at once with a function that stops the command from any thread; a stopped
        command raises TurnCancelled."""
        ...

    def clarify(self, question: str, *, choices: Sequence[str] = (), tool_call_id: str | None = None) -> str:
        """Ask the user a question (a form in the editor when it can show one, else the
        choices as permission options); returns the answer, raises ToolRefused when the
        question cannot be asked or is declined."""
        ...

    def elicit(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """Ask the user with a form or a URL as an ACP agent wrote it (`elicitation/create`'s
        params less its session): the editor's answer (`action`, `content`), or None when the
        editor shows no elicitation of that mode."""
        ...

    def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the editor that a URL elicitation it was shown has completed."""
        ...


@frozen
class ConfigChoice:
    value: str
    name: str
    description: str | None = None


@frozen
class ConfigOption:
    """A setting the adapter offers (model, reasoning effort, ...); values are validated by
    the server against `choices` before a turn sees them in `TurnInput.config`."""

    id: str
    name: str
    choices: tuple[ConfigChoice, ...]
    default: str
    description: str | None = None
    category: str | None = None  # ACP categories: model, model_config, thought_level, or _custom
    kind: Literal["select", "boolean"] = "select"  # a boolean has no choices; its value is "true" or "false"


@frozen
class SlashCommand:
    """A command the adapter handles; invoking it arrives as prompt text `/name args`."""

    name: str
    description: str
    hint: str | None = None


@frozen
class ModeChoice:
    """One of the modes an agent offers a session of its own."""

    id: str
    name: str
    description: str | None = None


@frozen
class SessionControls:
    """What an agent offers one session of its own, besides the server's mode and options: its
    modes (with the current one), its options (`ConfigOption.default` is the current value) and
    its commands. An adapter offers them through `session_controls(ready)`, called before a
    session's `session/new`, `session/load` or `session/resume` is answered, and tells changes
    through `ready.notes` (`ControlNotes`); `set_session_mode` and `set_session_option` change
    them and return them as they are then."""

    modes: tuple[ModeChoice, ...] = ()
    current_mode: str | None = None
    config_options: tuple[ConfigOption, ...] = ()
    commands: tuple[SlashCommand, ...] = ()


@runtime_checkable
class OffersControls(Protocol):
    """An adapter that offers sessions controls of their own (see `SessionControls`). Each
    call blocks (the adapter may ask its agent): the server calls them in worker threads."""

    def session_controls(self, ready: TurnInput) -> SessionControls: ...
    def set_session_mode(self, session_id: str, mode_id: str) -> SessionControls: ...
    def set_session_option(self, session_id: str, option_id: str, value: str) -> SessionControls: ...


@runtime_checkable
class ControlNotes(Protocol):
    """The notes of a session whose controls an adapter offers: it tells changes through them."""

    def controls(self, controls: SessionControls) -> None: ...


@frozen
class AuthMethod:
    """A way to authenticate the agent offers (ACP `authMethods`). An "agent" method runs in
    `authenticate(id)`; a "terminal" one is run by the editor itself, as the agent's command with
    `args` appended (and `env` added) in a terminal, and is offered only to an editor that can."""

    id: str
    name: str
    description: str | None = None
    kind: Literal["agent", "terminal"] = "agent"
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])


@frozen
class Health:
    """A quick check of configuration and reachability, for `acp-server doctor`."""

    ok: bool
    detail: str
    # name -> (value, source)
    settings: Mapping[str, tuple[str, str]] = field(default_factory=dict[str, tuple[str, str]])


@frozen
class AdapterCapabilities:
    """What a runtime can really do; the server advertises nothing beyond this."""

    streaming: bool = True
    image: bool = False
    audio: bool = False
    embedded_context: bool = False
    mcp_http: bool = False
    mcp_sse: bool = False
    context_window: int | None = None
    config_options: tuple[ConfigOption, ...] = ()
    commands: tuple[SlashCommand, ...] = ()
    cancel_latency: float = 1.0  # seconds within which a cancelled turn stops
    auth_methods: tuple[AuthMethod, ...] = ()
    logout: bool = False  # the adapter has `logout()`, which ends what `authenticate` began
    # session/fork may be offered: a copy of the session's journal is a fork of it (the agent
    # keeps nothing elsewhere, or forks what it keeps in `fork_session`); an agent below that
    # cannot fork its own session says False.
    fork: bool = True
    system_prompt: bool = False  # the agent honours `TurnInput.system_prompt` in append mode
    system_prompt_override: bool = False  # and in override mode


class RuntimeAdapter(Protocol):
    """One agent runtime. `run_turn` is called in a worker thread, one turn per session at a
    time; `cancel` may be called from another thread while it runs."""

    name: str

    def capabilities(self) -> AdapterCapabilities: ...
    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason: ...
    def cancel(self, session_id: str) -> None: ...


def open_session(adapter: RuntimeAdapter, ready: TurnInput) -> None:
    """Tell the adapter a session was created, loaded or resumed, so it can get ready (build its
    agent, connect) while the editor sets up instead of in the first prompt; `ready` carries the
    session's settings and no prompt. Adapters opt in by defining `open_session(ready)`."""
    hook = getattr(adapter, "open_session", None)
    if callable(hook):
        hook(ready)


def auth_needed(adapter: RuntimeAdapter) -> str | None:
    """Why no session can work until the user authenticates (an editor that can run a terminal
    auth method is told so at `session/new`, as ACP's `auth_required`), or None. Adapters opt in by
    defining `auth_needed()`; it may read files, so it is called in a worker thread."""
    hook = getattr(adapter, "auth_needed", None)
    reason = hook() if callable(hook) else None
    return reason if isinstance(reason, str) and reason else None


def speak_unstable(adapter: RuntimeAdapter) -> None:
    """Tell the adapter, before it is asked its capabilities, that the server speaks the parts
    of ACP that are still unstable (`--unstable`): an agent below is then offered the ones it
    may send (plan operations). Adapters opt in by defining `speak_unstable()`."""
    hook = getattr(adapter, "speak_unstable", None)
    if callable(hook):
        hook()


def fork_session(adapter: RuntimeAdapter, parent_id: str, ready: TurnInput) -> TranscriptSaved | None:
    """Let an agent that keeps its sessions itself fork `parent_id`'s for the new session `ready`
    describes (with the parent's history and transcript); what it returns is kept as the fork's
    transcript (an agent below: its fork's id). Adapters opt in by defining
    `fork_session(parent_id, ready)`; without it the journal's copy is the whole fork."""
    hook = getattr(adapter, "fork_session", None)
    if not callable(hook):
        return None
    saved = hook(parent_id, ready)
    return saved if isinstance(saved, TranscriptSaved) else None


def close_session(adapter: RuntimeAdapter, session_id: str) -> None:
    """Tell the adapter a session ended (closed, deleted, or the server is stopping), so it can
    free what it keeps per session; adapters opt in by defining `close_session(session_id)`."""
    hook = getattr(adapter, "close_session", None)
    if callable(hook):
        hook(session_id)


def health_of(adapter: RuntimeAdapter) -> Health:
    """The adapter's own `health()` when it has one; otherwise healthy by construction."""
    check = getattr(adapter, "health", None)
    if not callable(check):
        return Health(True, "no checks needed")
    health = check()
    if not isinstance(health, Health):
        raise TypeError(f"{type(adapter).__name__}.health() returned {type(health).__name__}, not Health")
    return health
