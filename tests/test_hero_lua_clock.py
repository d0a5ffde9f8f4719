"""hero.lua's calendar: the ISO 8601 date it spells from an epoch second.

Every job hash carries times that ``iso_second`` spelled (its days-from-civil
inverse). A call made today only checks today's date; here the function is
taken out of the library's own source and run by Redis over the seconds a
calendar formula gets wrong: leap days, the century rules, month and year
ends, and a spread of random seconds.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import redis.asyncio as aioredis

from gateway.supervisor import library

CALL = """
local out = {}
for i, s in ipairs(ARGV) do out[i] = iso_second(tonumber(s)) end
return out
"""


def _iso_second_source() -> str:
    """``iso_second`` as hero.lua defines it, nothing else, with the globals
    it uses (hero.lua binds them at its first call)."""
    lines = library.source().splitlines()
    begin = lines.index("local function iso_second(sec)")
    end = lines.index("end", begin)
    return "\n".join(["local floor, format = math.floor, string.format", *lines[begin : end + 1]])


def _edges() -> list[datetime]:
    """The last and first second around every month's end, 1970 to 2401."""
    out = []
    for year in (1970, 1999, 2000, 2023, 2024, 2026, 2027, 2028, 2100, 2200, 2400):
        for month in range(1, 13):
            first = datetime(year, month, 1, tzinfo=UTC)
            out += [first, first - timedelta(seconds=1)]
    return out


async def test_iso_second_spells_every_date_as_python_does(rds: aioredis.Redis) -> None:
    rng = random.Random(18)
    seconds = [int(at.timestamp()) for at in _edges()]
    seconds += [rng.randrange(0, 7_258_118_400) for _ in range(2_000)]  # 1970 to 2200
    spelled = await rds.eval(_iso_second_source() + CALL, 0, *seconds)
    expected = [datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%S") for s in seconds]
    wrong = [
        (s, got, want)
        for s, got, want in zip(seconds, spelled, expected, strict=True)
        if got != want
    ]
    assert not wrong, wrong[:5]
    assert "2024-02-29T23:59:59" in spelled and "2100-03-01T00:00:00" in spelled
