"""Summaries of py-spy raw (collapsed) stack files: where the time goes.

``py-spy record --format raw`` writes one line per distinct stack,
``frame;frame;...;leaf count``. Here: self time per function (the leaf), total
time per function (anywhere on the stack) and the share spent idle (waiting in
the event loop's select/epoll), as percentages of all samples.

    python bench/profile_report.py bench/out/profile/*.txt
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

IDLE = re.compile(r"\b(select|poll|epoll_wait|_run_once \(asyncio/base_events.py:\d+\)$)")
_LINE = re.compile(r" \(([^()]*?):\d+\)")


def _frame(frame: str) -> str:
    """``fn (path/to/file.py:123)`` -> ``fn (file.py)`` (line numbers merged)."""
    frame = _LINE.sub(lambda m: f" ({Path(m.group(1)).name})", frame)
    return frame.strip()


def summarize(path: Path, top: int = 25) -> str:
    self_t: Counter[str] = Counter()
    total_t: Counter[str] = Counter()
    samples = idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        samples += count
        leaf = frames[-1]
        if "select" in leaf or "epoll" in leaf or "poll (selectors.py)" in leaf:
            idle += count
        self_t[leaf] += count
        for f in set(frames):
            total_t[f] += count
    if not samples:
        return f"## {path.name}\n\n(no samples)\n"
    out = [
        f"## {path.name}",
        "",
        f"{samples} samples, {100 * idle / samples:.1f}% idle (event loop waiting)",
        "",
        "| self % | function |",
        "| ---: | --- |",
    ]
    out += [f"| {100 * c / samples:.1f} | `{f}` |" for f, c in self_t.most_common(top)]
    out += ["", "| total % | function |", "| ---: | --- |"]
    out += [f"| {100 * c / samples:.1f} | `{f}` |" for f, c in total_t.most_common(top)]
    return "\n".join(out) + "\n"


def main(paths: list[str]) -> None:
    for p in paths:
        print(summarize(Path(p)))


if __name__ == "__main__":
    main(sys.argv[1:])
