"""The operator console, served at ``/``: jobs, a job's detail, live charts, DLQ.

Plain static files (no framework, no build step) that talk to the gateway
through the generated JS client, the same one users get. An installed
gateway has no ``clients/`` folder, and a second committed copy here would be
one fact in two places, so the gateway renders the client from its own
contract on first request (``client_module``) and keeps it. Only the files
listed below are served: mounting this package folder as static files would
also serve its Python sources.

The chart library is the ``plotly.min.js`` inside the ``plotly`` Python
package (a dependency, so it ships with the gateway and works offline), served
at ``/web/plotly.min.js``: 4.8 MB, so it goes gzipped (about 1.5 MB) with an
ETag, and a reload that still has it costs a 304.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from gateway.codegen import js_client
from gateway.codegen.model import load
from gateway.pipeline.charts import plotly_js

WEB_DIR = Path(__file__).resolve().parent

_JS = "text/javascript; charset=utf-8"

#: URL path → (file in this folder, media type).
FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/web/app.js": ("app.js", _JS),
    "/web/dom.js": ("dom.js", _JS),
    "/web/detail.js": ("detail.js", _JS),
    "/web/live.js": ("live.js", _JS),
    "/web/admin.js": ("admin.js", _JS),
    "/web/report.js": ("report.js", _JS),
    "/web/style.css": ("style.css", "text/css; charset=utf-8"),
}
PLOTLY_URL = "/web/plotly.min.js"
#: Where the page (and anyone) gets the generated JS client.
CLIENT_URL = f"/client/{js_client.MODULE}"


def _endpoint(name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    path = WEB_DIR / name

    async def serve(request: Request) -> Response:
        # no-cache: revalidate each load, so a new gateway version never runs a stale page
        return FileResponse(path, media_type=media_type, headers={"Cache-Control": "no-cache"})

    return serve


@functools.cache
def _plotly() -> tuple[bytes, bytes, str]:
    """The bundle, gzipped once, and its ETag (read on first request, not at import)."""
    raw = plotly_js().read_bytes()
    return raw, gzip.compress(raw, 6), '"' + hashlib.sha256(raw).hexdigest()[:32] + '"'


async def _serve_plotly(request: Request) -> Response:
    raw, packed, etag = _plotly()
    headers = {"ETag": etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(packed, media_type=_JS, headers=headers)
    return Response(raw, media_type=_JS, headers=headers)


@functools.cache
def client_module() -> bytes:
    """The JS client as ``hero-gateway codegen`` writes ``clients/js/hero-client.js``,
    rendered from the contract this gateway serves (once per process)."""
    return js_client.emit_module(load()).encode()


async def _serve_client(request: Request) -> Response:
    return Response(client_module(), media_type=_JS, headers={"Cache-Control": "no-cache"})


def web_routes() -> list[Route]:
    """The page's routes, for the gateway's Starlette app."""
    routes = [
        Route(url, _endpoint(name, media_type), methods=["GET", "HEAD"])
        for url, (name, media_type) in FILES.items()
    ]
    routes.append(Route(PLOTLY_URL, _serve_plotly, methods=["GET", "HEAD"]))
    routes.append(Route(CLIENT_URL, _serve_client, methods=["GET", "HEAD"]))
    return routes
