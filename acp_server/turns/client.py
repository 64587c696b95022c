"""The editor as the turns see it: what it offered at `initialize`, and how to ask it things.

`ClientCapabilities` reads the `clientCapabilities` object; `EditorChannel` sends one session's
requests through the peer and turns the peer's failures into what a tool understands: a closed
connection ends the turn (`TurnCancelled`), a timeout or an error refuses the tool (`ToolRefused`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from acp_server.rpc.errors import PeerClosedError, RequestTimeoutError, RpcError
from acp_server.rpc.peer import Peer
from adapters.base import ToolRefused, TurnCancelled

CLIENT_TIMEOUT = 60.0  # seconds the editor gets to answer a file or terminal request


def _object(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    elicitation_form: bool = False

    @classmethod
    def from_wire(cls, caps: dict[str, Any]) -> ClientCapabilities:
        # Tolerant like the reference implementation: a malformed flag means "not offered".
        fs, elicitation = _object(caps.get("fs")), _object(caps.get("elicitation"))
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            elicitation_form=isinstance(elicitation.get("form"), dict),
        )


@dataclass(frozen=True, slots=True)
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
            raise ToolRefused(f"The editor refused {method}: {exc.message}") from None
