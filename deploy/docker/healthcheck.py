#!/usr/bin/env python3
"""hero-healthcheck: the container health checks of the compose stack.

    hero-healthcheck http URL    URL answers 2xx (the gateway's /healthz: Redis reachable)
    hero-healthcheck actor       an actor of this container has a live presence key

Exit status 0 when healthy, 1 when not (with one line on stderr saying why).
The actor check reads presence through ``gateway.supervisor.presence`` with
the container's own settings (``HERO_REDIS_URL``), so no key name is spelt
here; it matches actors by host name, which is the container's.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import urllib.error
import urllib.request

HTTP_TIMEOUT = 3.0


def check_http(url: str) -> str | None:
    """Why ``url`` is unhealthy, or None."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as reply:
            status = int(reply.status)
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} unreachable: {getattr(exc, 'reason', exc)}"
    return None if 200 <= status < 300 else f"{url} answered {status}"


async def check_actor(hostname: str) -> str | None:
    """Why no actor of ``hostname`` is live, or None."""
    from gateway.config import resolve
    from gateway.supervisor import presence
    from gateway.supervisor.wire import Wire

    client = Wire(resolve().redis, "healthcheck")
    try:
        actors = await presence.live(client)
    except Exception as exc:  # Redis down, bad URL: unhealthy, not a traceback
        return f"cannot read actor presence: {type(exc).__name__}: {exc}"
    finally:
        await client.aclose()
    if any(a.get("hostname") == hostname for a in actors):
        return None
    return f"no live actor on host {hostname} ({len(actors)} live elsewhere)"


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "http":
        problem = check_http(argv[1])
    elif argv == ["actor"]:
        problem = asyncio.run(check_actor(socket.gethostname()))
    else:
        print("usage: hero-healthcheck http URL | hero-healthcheck actor", file=sys.stderr)
        return 2
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
