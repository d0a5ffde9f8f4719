"""The gateway's web page: a live view of jobs, queues and actors, served at ``/``.

Plain static files (no framework, no build step) that talk to the gateway
through the generated JS client, the same one users get. The client module
is a generated copy (``hero-gateway codegen`` writes it here too), because
an installed gateway has no ``clients/`` folder. Only the files listed below
are served: mounting this package folder as static files would also serve
its Python sources.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

WEB_DIR = Path(__file__).resolve().parent

#: URL path → (file in this folder, media type).
FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/web/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/web/style.css": ("style.css", "text/css; charset=utf-8"),
    "/client/hero-client.js": ("hero-client.js", "text/javascript; charset=utf-8"),
}


def _endpoint(name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    path = WEB_DIR / name

    async def serve(request: Request) -> Response:
        # no-cache: revalidate each load, so a new gateway version never runs a stale page
        return FileResponse(path, media_type=media_type, headers={"Cache-Control": "no-cache"})

    return serve


def web_routes() -> list[Route]:
    """The page's routes, for the gateway's Starlette app."""
    return [
        Route(url, _endpoint(name, media_type), methods=["GET", "HEAD"])
        for url, (name, media_type) in FILES.items()
    ]
