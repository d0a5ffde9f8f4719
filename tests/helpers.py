"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


def job(script: str = "print('ok')", **fields: Any) -> dict[str, Any]:
    """A JobSpec for tests."""
    return {"script": script, "script_type": fields.pop("script_type", "python"), **fields}


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    """Wait until ``check`` passes (for effects another process produces)."""
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
