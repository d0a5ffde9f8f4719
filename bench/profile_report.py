"""Summaries of py-spy raw (collapsed) stack files: where the time goes.

``py-spy record --format raw`` writes one line per distinct stack,
``frame;frame;...;leaf count``. Here: self time per function (the leaf), total
time per function (anywhere on the stack) and the share spent idle (waiting in
the event loop's select/epoll), as percentages of all samples.

    python bench/profile_report.py bench/out/profile/*.txt
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: A sample whose innermost Python frame is one of these waits in asyncio's poll.
_POLLING = ("select", "epoll", "poll (selectors.py)")
#: Under uvloop the loop is C code with no Python frame of its own: a sample
#: whose innermost frame is this one is in it, polling or running its own
#: callbacks, which py-spy cannot tell apart.
_UVLOOP = "Runner.run (runners.py)"
_LINE = re.compile(r" \(([^()]*?):\d+\)")


def _frame(frame: str) -> str:
    """``fn (path/to/file.py:123)`` -> ``fn (file.py)`` (line numbers merged)."""
    frame = _LINE.sub(lambda m: f" ({Path(m.group(1)).name})", frame)
    return frame.strip()


def summarize(path: Path, top: int = 25) -> str:
    self_t: Counter[str] = Counter()
    total_t: Counter[str] = Counter()
    samples = idle = in_uvloop = 0
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
        if any(word in leaf for word in _POLLING):
            idle += count
        elif leaf == _UVLOOP:
            in_uvloop += count
        self_t[leaf] += count
        for f in set(frames):
            total_t[f] += count
    if not samples:
        return f"## {path.name}\n\n(no samples)\n"
    out = [
        f"## {path.name}",
        "",
        f"{samples} samples, {100 * idle / samples:.1f}% idle (asyncio's poll), "
        f"{100 * in_uvloop / samples:.1f}% in uvloop's own C code (its poll included)",
        "",
        "| self % | function |",
        "| ---: | --- |",
    ]
    out += [f"| {100 * c / samples:.1f} | `{f}` |" for f, c in self_t.most_common(top)]
    out += ["", "| total % | function |", "| ---: | --- |"]
    out += [f"| {100 * c / samples:.1f} | `{f}` |" for f, c in total_t.most_common(top)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="py-spy raw (collapsed) stack files")
    parser.add_argument("--top", type=int, default=25, help="functions per table (default 25)")
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.is_file():
            parser.error(f"no such file: {path}")
        print(summarize(path, args.top))


if __name__ == "__main__":
    main()
