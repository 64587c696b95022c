"""The editor as the turns see it: what it offered at `initialize`, and how to ask it things.

`ClientCapabilities` reads the `clientCapabilities` object; `EditorChannel` sends one session's
requests through the peer and turns the peer's failures into what a tool understands: a closed
connection ends the turn (`TurnCancelled`); a timeout, an error answer (its `data` details
included) or an answer that does not match the schema refuses the tool (`ToolRefused`).
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from acp_server.rpc.errors import PeerClosedError, RequestTimeoutError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.turns.quirks import Quirks, quirks_for
from adapters.base import ToolRefused, TurnCancelled
from adapters.frozen import frozen

if TYPE_CHECKING:
    from acp_server.protocol.models import WireModel

CLIENT_TIMEOUT = 60.0  # seconds the editor gets to answer a file or terminal request
DETAIL_LIMIT = 200  # characters of an error's `data` a refusal quotes: a message, not a dump

A = TypeVar("A", bound="WireModel")


def _object(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


@frozen
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    elicitation_form: bool = False
    elicitation_url: bool = False
    compaction: bool = False  # session.compaction: compaction_update / compaction_summary_chunk
    notices: bool = False  # session.notices: notice updates
    boolean_options: bool = False  # session.configOptions.boolean: boolean config options
    plan: bool = False  # plan (ACP unstable): plan_update / plan_removed, served only with --unstable
    terminal_auth: bool = False  # auth.terminal (or the older _meta "terminal-auth"): terminal auth methods
    quirks: Quirks = field(default_factory=Quirks)  # known mistakes of this client (turns/quirks.py), by its clientInfo

    @classmethod
    def from_wire(cls, caps: dict[str, Any], info: dict[str, Any] | None = None) -> ClientCapabilities:
        # Tolerant like the reference implementation: a malformed flag means "not offered".
        fs, elicitation = _object(caps.get("fs")), _object(caps.get("elicitation"))
        session = _object(caps.get("session"))
        name, version = _object(info).get("name"), _object(info).get("version")
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            elicitation_form=isinstance(elicitation.get("form"), dict),
            elicitation_url=isinstance(elicitation.get("url"), dict),
            compaction=isinstance(session.get("compaction"), dict),
            notices=isinstance(session.get("notices"), dict),
            boolean_options=isinstance(_object(session.get("configOptions")).get("boolean"), dict),
            plan=isinstance(caps.get("plan"), dict),
            # `_meta.terminal-auth` is how clients (and the ACP Registry's check) asked before `auth.terminal`.
            terminal_auth=_object(caps.get("auth")).get("terminal") is True
            or _object(caps.get("_meta")).get("terminal-auth") is True,
            quirks=quirks_for(name if isinstance(name, str) else None, version if isinstance(version, str) else None),
        )


@frozen
class EditorChannel:
    """Requests to the editor on behalf of one session (`sessionId` is added to every one)."""

    peer: Peer
    session_id: str

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None) -> Any:
        """The raw answer; timeouts and error answers are the caller's to interpret."""
        try:
            return await self.peer.request(method, {"sessionId": self.session_id, **params}, timeout=timeout)
        except PeerClosedError:
            raise TurnCancelled("the client connection closed") from None

    async def call(self, method: str, params: dict[str, Any], *, timeout: float | None = CLIENT_TIMEOUT) -> Any:
        """The answer, or `ToolRefused` with a message the user can read."""
        try:
            return await self.request(method, params, timeout=timeout)
        except RequestTimeoutError as exc:
            raise ToolRefused(f"The editor did not answer in time ({exc})") from None
        except RpcError as exc:
            raise ToolRefused(f"The editor refused {method}: {error_text(exc)}") from None

    async def ask(
        self, method: str, params: dict[str, Any], answer: type[A], *, timeout: float | None = CLIENT_TIMEOUT
    ) -> A:
        """The answer validated as `answer`; `ToolRefused` as for `call`, or when it is malformed."""
        return check_answer(method, answer, await self.call(method, params, timeout=timeout))


def check_answer(method: str, answer: type[A], result: Any) -> A:
    """`result` as `answer`, or `ToolRefused` saying what the editor sent wrong."""
    from acp_server.protocol.answers import MalformedAnswerError, parse_answer  # pydantic: not at start-up

    try:
        return parse_answer(answer, result)
    except MalformedAnswerError as exc:
        raise ToolRefused(f"The editor's answer to {method} was malformed: {exc}") from None


def error_text(exc: RpcError) -> str:
    """An error answer's message with the details its `data` carries: one line, each part cut
    at DETAIL_LIMIT characters (a stack trace or a dump must not flood the tool call)."""
    message, detail = _line(exc.message), _line(_detail(exc.data))
    return message if not detail or detail in message else f"{message} ({detail})"


def _detail(data: object) -> str:
    # The TypeScript SDK puts a thrown error's text in `data.details`; others send a bare string.
    if data is None or isinstance(data, str):
        return data or ""
    if isinstance(data, dict):
        fields = cast(dict[str, Any], data)
        text = next((fields[key] for key in ("details", "message", "reason") if isinstance(fields.get(key), str)), None)
        if text is not None:
            return text
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def _line(text: str) -> str:
    line = " ".join(text[: DETAIL_LIMIT * 4].split())
    return line if len(line) <= DETAIL_LIMIT else line[: DETAIL_LIMIT - 1].rstrip() + "…"
