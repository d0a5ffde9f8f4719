"""Stop requests for an actor instance: read from its control queue.

Hero's ctl keys carry ``{"action": "stop", "job_id": ...}`` messages; ours
add the ``run`` they stop (hero.lua ``tell_stop``). The
reader blocks on a connection of its own, so closing that connection ends
it at once instead of waiting out its BLPOP.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from gateway.supervisor import connection
from gateway.supervisor.wire import Wire

#: The actor link's log: a stop request is part of the link's story.
log = logging.getLogger("gateway.supervisor.worker")


async def obey(
    control: Wire, ctl_key: str, on_stop: Callable[[str, str], None], closed: Callable[[], bool]
) -> None:
    """Call ``on_stop`` with the job id and run of each stop request on
    ``ctl_key`` until ``closed()`` (run "": a message without one, such as
    Hero's, stops any run of the id); a Redis outage is waited out, a
    malformed message skipped."""
    while not closed():
        try:
            reply = await control.execute_command("BLPOP", ctl_key, 5)
        except connection.UNAVAILABLE:
            if closed():
                return
            await asyncio.sleep(0.5)
            continue
        if reply is None:
            continue
        try:
            message = json.loads(reply[1])
        except ValueError:
            log.warning("ignored malformed control message")
            continue
        if isinstance(message, dict) and message.get("action") == "stop":
            run = message.get("run")
            on_stop(str(message.get("job_id")), run if isinstance(run, str) else "")
