"""The operator console, served at ``/``: jobs, a job's detail, live charts, DLQ.

Plain static files (no framework, no build step) that talk to the gateway
through the generated JS client, the same one users get. The client module
is a generated copy (``hero-gateway codegen`` writes it here too), because
an installed gateway has no ``clients/`` folder. Only the files listed below
are served: mounting this package folder as static files would also serve
its Python sources.

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
    "/client/hero-client.js": ("hero-client.js", _JS),
}
PLOTLY_URL = "/web/plotly.min.js"


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


def web_routes() -> list[Route]:
    """The page's routes, for the gateway's Starlette app."""
    routes = [
        Route(url, _endpoint(name, media_type), methods=["GET", "HEAD"])
        for url, (name, media_type) in FILES.items()
    ]
    routes.append(Route(PLOTLY_URL, _serve_plotly, methods=["GET", "HEAD"]))
    return routes
