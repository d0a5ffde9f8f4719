"""How long hero_client waits, shared by the connection and its subscriptions.

Hand-written (the generator copies it verbatim as ``hero_client/_timeouts.py``).
"""

from __future__ import annotations

import enum

#: Extra seconds a call that makes the server wait (``wait``) gets over that wait.
WAIT_GRACE = 10.0
#: Seconds between re-sending a call whose socket dropped (the reconnect is under way).
RETRY_PAUSE = 0.05
#: A subscription that has seen no event yet resumes from when it was made, this many
#: milliseconds earlier (clock granularity and skew; an extra event beats a lost one).
RESUME_MARGIN_MS = 2000


class Default(enum.Enum):
    """``timeout=Default.TIMEOUT``: the client's own timeout."""

    TIMEOUT = "default"


#: A call's timeout: seconds, None for no limit, or the client's default.
Timeout = float | None | Default
