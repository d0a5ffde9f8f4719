"""The gateway's web page: a live view of jobs, queues and actors, served at ``/``.

Plain static files (no framework, no build step) that talk to the gateway
through the generated JS client, the same one users get. An installed
gateway has no ``clients/`` folder, and a second committed copy here would be
one fact in two places, so the gateway renders the client from its own
contract on first request (``client_module``) and keeps it. Only the files
listed below are served: mounting this package folder as static files would
also serve its Python sources.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from gateway.codegen import js_client
from gateway.codegen.model import load

WEB_DIR = Path(__file__).resolve().parent

#: URL path → (file in this folder, media type).
FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/web/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/web/style.css": ("style.css", "text/css; charset=utf-8"),
}
#: Where the page (and anyone) gets the generated JS client.
CLIENT_URL = f"/client/{js_client.MODULE}"
JS_MEDIA_TYPE = "text/javascript; charset=utf-8"


def _endpoint(name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    path = WEB_DIR / name

    async def serve(request: Request) -> Response:
        # no-cache: revalidate each load, so a new gateway version never runs a stale page
        return FileResponse(path, media_type=media_type, headers={"Cache-Control": "no-cache"})

    return serve


@functools.cache
def client_module() -> bytes:
    """The JS client as ``hero-gateway codegen`` writes ``clients/js/hero-client.js``,
    rendered from the contract this gateway serves (once per process)."""
    return js_client.emit_module(load()).encode()


async def _client(request: Request) -> Response:
    return Response(
        client_module(), media_type=JS_MEDIA_TYPE, headers={"Cache-Control": "no-cache"}
    )


def web_routes() -> list[Route]:
    """The page's routes, for the gateway's Starlette app."""
    return [
        *(
            Route(url, _endpoint(name, media_type), methods=["GET", "HEAD"])
            for url, (name, media_type) in FILES.items()
        ),
        Route(CLIENT_URL, _client, methods=["GET", "HEAD"]),
    ]
