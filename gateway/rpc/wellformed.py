"""What a parsed request may contain: valid Unicode, and only so much nesting.

``json.loads`` turns a ``\\ud800`` escape into a lone surrogate: a Python
string that no UTF-8 encoder accepts. Stored, it breaks every later read of
the job (its hash, every listing page holding it); echoed, it breaks the
reply. So no such string gets past the parser: the transport refuses it
where it appears (see ``protocol``). The same walk bounds nesting: a value
nested hundreds deep parses fine but exhausts the recursion of the schema
check and of the supervisor's encoder later, which would be a -32603.

``problem``'s walk is iterative (a deep value cannot make it recurse), and
``may_hold_surrogates`` and ``may_be_deep`` let the parser skip it for the usual frame, which has no
``\\u`` escape and too few brackets to be deep.
"""

from __future__ import annotations

import re
from typing import Any

#: Deepest nesting allowed inside ``params`` (the contract's shapes need about 3).
MAX_DEPTH = 32

#: What nests (a tuple: ``isinstance`` takes it faster than ``dict | list``).
_CONTAINERS = (dict, list)

_SURROGATE = re.compile("[\ud800-\udfff]")

INVALID_UNICODE = "is not valid Unicode (a lone surrogate)"
INVALID_KEY = "has a member name that is not valid Unicode (a lone surrogate)"
TOO_DEEP = f"is nested deeper than {MAX_DEPTH} levels"


def may_be_deep(text: str) -> bool:
    """Whether ``text`` could hold a value nested past MAX_DEPTH (False: it cannot;
    with ``may_hold_surrogates`` false too, the walk can find nothing)."""
    return text.count("[") + text.count("{") > MAX_DEPTH


def may_hold_surrogates(text: str) -> bool:
    """Whether ``text`` could hold a lone surrogate (False: only depth can be wrong).
    A batch of a few dozen calls has more brackets than MAX_DEPTH, so this is
    what spares its elements the full walk."""
    return "\\u" in text or not text.isascii()


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests containers deeper than ``limit``: ``problem``'s
    depth rule alone, over containers only (no strings, no paths), for values
    that cannot hold a lone surrogate. It recurses, but never more than
    ``limit`` calls deep, and takes about a third of the time a level-by-level
    walk took (0.7 against 1.9 µs for a ``job.create``'s params)."""
    if not isinstance(value, _CONTAINERS):
        return False
    if limit < 1:
        return True
    for sub in value.values() if isinstance(value, dict) else value:
        if isinstance(sub, _CONTAINERS) and too_deep(sub, limit - 1):
            return True
    return False


def valid_text(value: str) -> bool:
    """Whether ``value`` encodes as UTF-8 (holds no lone surrogate)."""
    return value.isascii() or _SURROGATE.search(value) is None


def problem(value: Any, limit: int = MAX_DEPTH) -> tuple[str, str] | None:
    """The first (path, what is wrong) in ``value``: a string or member name
    that is not valid Unicode, or a container nested deeper than ``limit``.
    The path joins member names and indices with dots, like the schema check's.
    None when the value is clean."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if not valid_text(item):
                return path, INVALID_UNICODE
        elif isinstance(item, dict | list):
            if depth >= limit:
                return path, TOO_DEEP
            if isinstance(item, dict):
                for key, sub in item.items():
                    if not valid_text(key):
                        return path, INVALID_KEY
                    stack.append((sub, depth + 1, f"{path}.{key}" if path else key))
            else:
                stack.extend(
                    (sub, depth + 1, f"{path}.{i}" if path else str(i))
                    for i, sub in enumerate(item)
                )
    return None
