"""The workbench page's routes on the runner's remote endpoint: `/` (the page `pair` prints) and
its assets under `/ui/`, read from the package's `webui/` folder and served with a strict
Content-Security-Policy (scripts and styles from this origin only, no inline script, no eval;
connections only to this origin's WebSocket). The page needs no token to load: it holds none of
the user's data, and it reads the token from the URL fragment, which no request carries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

ASSETS = Path(__file__).resolve().parent / "webui"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def csp(host: str, *, tls: bool) -> str:
    """The policy: this origin for everything, and its own `/acp` WebSocket for connections."""
    socket = f"{'wss' if tls else 'ws'}://{host}"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self' {socket}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def page_routes(our_host: Callable[[Request], bool], *, tls: bool) -> list[Route]:
    """`/` and `/ui/{name}`; `our_host` refuses a foreign `Host` (DNS rebinding), as `/acp` does."""

    async def serve(request: Request) -> Response:
        host = request.headers.get("host", "")
        if not our_host(request):
            return PlainTextResponse("Forbidden: Host is not this server", status_code=403)
        name = request.path_params.get("name", "index.html")
        path = ASSETS / name
        # only files directly in webui/, by their plain names: no traversal, no directories
        if "/" in name or name.startswith(".") or path.suffix not in TYPES or not path.is_file():
            return PlainTextResponse("Not Found", status_code=404)
        headers = {
            "Content-Security-Policy": csp(host, tls=tls),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        }
        return Response(path.read_bytes(), media_type=TYPES[path.suffix], headers=headers)

    return [Route("/", serve, methods=["GET"]), Route("/ui/{name}", serve, methods=["GET"])]
