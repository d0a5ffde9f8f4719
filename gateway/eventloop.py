"""Which event loop a long-running command runs on.

uvloop (libuv) wakes faster and spends less Python per socket event than
asyncio's default selector loop; on the job path, where every hop is a
socket wake-up, that is most of a WebSocket run-and-wait (see bench/). It is
optional: ``auto`` falls back to asyncio where uvloop is not installed
(Windows, or an install without it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], choice: str = "auto") -> T:
    """``asyncio.run`` on the chosen loop (``auto``, ``uvloop`` or ``asyncio``)."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                main.close()
                raise RuntimeError("--event-loop uvloop: uvloop is not installed") from None
        else:
            return uvloop.run(main)
    return asyncio.run(main)
