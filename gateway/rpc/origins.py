"""Which browser pages may use a gateway that has no API key.

With no key the gateway serves everyone as ``anonymous``, who may run jobs.
A browser sends no key of its own, so without this check any web page the
operator opens could use a gateway on ``127.0.0.1``: a ``text/plain`` POST
to ``/rpc`` is a CORS "simple request" (no preflight stops it; the page only
cannot read the answer), and a WebSocket has no CORS at all. A page whose
name is made to resolve to ``127.0.0.1`` (DNS rebinding) would even be the
gateway's own origin by ``Host``.

Browsers name the page in ``Origin`` on every WebSocket upgrade and every
cross-origin POST; programs (curl, the generated clients) send none. So a
request with an ``Origin`` is served key-less only when that origin is the
gateway itself under a loopback name (``http://127.0.0.1:8080`` for a
request to ``127.0.0.1:8080``: the console page), or is listed in
``HERO_ALLOWED_ORIGINS``. Once keys exist a page needs one like any client,
and nothing here is checked.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from gateway.config.process import normalise_origin

#: What the refusal says (it names the setting that lets a page in).
REFUSED = (
    "This gateway has no API key, so browser pages of other origins may not use it: "
    "create a key, or list the page's origin in HERO_ALLOWED_ORIGINS"
)

#: The page scheme that opens a WebSocket of each scheme.
_PAGE_SCHEME = {"ws": "http", "wss": "https"}


def may_use_keyless(
    origin: str | None, host: str | None, scheme: str, allowed: frozenset[str]
) -> bool:
    """Whether a request that would be served without a key may be.

    ``origin`` and ``host`` are the request's headers (None when absent),
    ``scheme`` its URL's (``http``/``https``/``ws``/``wss``), ``allowed``
    the configured origins (as ``normalise_origin`` spells them)."""
    if origin is None:
        return True  # not a browser page
    page = normalise_origin(origin)
    if page is not None and page in allowed:
        return True
    if page is None or host is None:
        return False
    own = normalise_origin(f"{_PAGE_SCHEME.get(scheme, scheme)}://{host}")
    hostname = urlsplit(page).hostname
    return page == own and hostname is not None and _loopback_name(hostname)


def _loopback_name(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False
