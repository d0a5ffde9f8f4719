"""The typed binding of ``supervisor/lua/hero.lua``: one builder per Function.

Each builder returns a ``Call``: the Function's name, its key names, its
arguments after the common head, and the decoder of its reply. Nothing here
talks to Redis: ``supervisor/library.py`` runs a ``Call`` and hands back
what the decoder made of the reply. A raw reply is a ``Reply``, opaque to
everyone but the decoders here, so mypy rejects ``reply[0]`` elsewhere.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, NamedTuple, NewType, TypeVar, cast

import orjson

from gateway.config import Config
from gateway.model.claim import CLAIMED_WIDTH, Claimed, CycleReply, Outcome
from gateway.model.job import JobSpec, compact_json

#: A Function's reply as Redis sent it; only this module's decoders look inside.
Reply = NewType("Reply", object)
R = TypeVar("R")
Arg = str | int | float


@dataclass(frozen=True)
class Call(Generic[R]):
    """One FCALL: ``command(config)`` is what goes to Redis, ``decode`` reads the reply."""

    function: str
    args: tuple[Arg, ...]
    decode: Callable[[Reply], R]
    key_names: tuple[str, ...] = ()

    def command(self, config: Config) -> tuple[Arg, ...]:
        return ("FCALL", self.function, len(self.key_names), *self.key_names,
                *head(config), *self.args)  # fmt: skip


def head(config: Config) -> list[str]:
    """The ARGV every Function call starts with (see the top of hero.lua).

    The jitter is drawn here because scripts must be deterministic; the rest
    is the config's, spelled once per config (a process has one)."""
    global _spelled
    if _spelled is None or _spelled[0] is not config:
        _spelled = (config, _spell(config))
    maxlen, compat, ttl, base, most, dlq = _spelled[1]
    return [maxlen, compat, ttl, base, most, repr(random.random()), dlq]


def _spell(config: Config) -> tuple[str, str, str, str, str, str]:
    return (str(config.events_maxlen), compat_spec(config), str(config.job_ttl),
            repr(config.retry_base), repr(config.retry_max), str(config.dlq_maxlen))  # fmt: skip


#: The last config ``head`` spelled, and how (compared by identity: cheap).
_spelled: tuple[Config, tuple[str, str, str, str, str, str]] | None = None


def compat_spec(config: Config) -> str:
    """Head entry [2]: "0" when compat is off, else "1" and each type's own
    legacy queue kinds (``HERO_LEGACY_QUEUES``)."""
    if not config.compat_legacy:
        return "0"
    return "1" + "".join(f";{t}={'+'.join(kinds)}" for t, kinds in config.legacy_queues)


def _rows(reply: Reply) -> list[Any]:
    return cast(list[Any], reply)


def _int(reply: Reply) -> int:
    return int(cast(int, reply))


def _bool(reply: Reply) -> bool:
    return bool(reply)


# -- submit, start, stop ------------------------------------------------------


class Verdict(Enum):
    """How a transition asked of one job went."""

    DONE = "done"
    NOT_FOUND = "not_found"
    INVALID_STATE = "invalid_state"  # ``status`` says which it is in
    EXISTS = "exists"  # submit: the id is a job of this caller already
    TAKEN = "taken"  # submit: another caller holds the id
    BAD_PREREQUISITE = "bad_prerequisite"  # submit: ``prerequisite`` is unknown


class Transition(NamedTuple):
    """A submit's, start's or stop's answer: the job's status after it, and the
    queue it was dispatched to (None: not dispatched). A NamedTuple: one is
    made per job per call, in half a frozen dataclass's time."""

    verdict: Verdict
    status: str = ""
    queue: str | None = None
    prerequisite: str | None = None


def _transition(row: Sequence[Any]) -> Transition:
    """``{'not_found'}``, ``{'invalid_state', st}``, ``{'taken'}``,
    ``{'bad_prerequisite', p}``, ``{'exists', st, q}`` or ``{status, q}``."""
    kind = str(row[0])
    rest = [str(x) if x is not None else "" for x in row[1:]]
    if kind in ("not_found", "taken"):
        return Transition(Verdict(kind))
    if kind == "invalid_state":
        return Transition(Verdict.INVALID_STATE, rest[0])
    if kind == "bad_prerequisite":
        return Transition(Verdict.BAD_PREREQUISITE, prerequisite=rest[0])
    if kind == "exists":
        return Transition(Verdict.EXISTS, rest[0], (rest[1:] or [""])[0] or None)
    return Transition(Verdict.DONE, kind, (rest or [""])[0] or None)


def strings_json(strings: list[str]) -> str:
    """A list of strings as a Function's JSON argument. hero.lua decodes it
    (cjson), so only the strings count, not how the text escapes them:
    orjson's text (0.17 against 1.9 µs for a job's fields), or the standard
    encoder's for a string orjson refuses (a lone surrogate, which only the
    Python API can pass: the RPC layer refuses it)."""
    try:
        return orjson.dumps(strings).decode()
    except orjson.JSONEncodeError:
        return compact_json(strings)


class Refused(Exception):
    """A command inside a many-job Function call failed for this job (Redis's
    error message as the text); the call's other jobs went on."""


#: The answers of a job a submit or a start moved on (hero.lua ``answer``): its
#: status now, and its queue when dispatched. Most answers are one of these.
_MOVED = frozenset(("created", "waiting", "dispatched", "error"))


def _each(reply: Reply) -> list[Transition | Refused]:
    """A many-job call's answers, three values per job (hero.lua ``answer``;
    one array rather than one per job costs Redis less to send): its
    Transition, or Refused. The usual answer is read without ``_transition``'s
    steps (about a microsecond a job in the gateway)."""
    flat = _rows(reply)
    out: list[Transition | Refused] = []
    for i in range(0, len(flat), 3):
        kind = flat[i]
        if kind in _MOVED:
            out.append(Transition(Verdict.DONE, kind, flat[i + 1] or None))
        elif kind == "failed":
            out.append(Refused(str(flat[i + 1])))
        else:
            out.append(_transition(flat[i : i + 3]))
    return out


#: What ``hero_submit_many`` takes of each job, in order, after its id and its
#: prerequisites (hero.lua ``SUBMIT_WIDTH`` counts all of them): the job
#: hash's fields as a client gave them, and ``queue``, where it is dispatched
#: (``supervisor.keys.dispatch_queue``). An empty group, instance or mode is
#: not written (hero.lua ``submit``).
SUBMIT_FIELDS = ("script", "script_type", "caller_id", "context_id", "worker_id",
                 "priority", "timeout", "retries", "env_vars", "queue", "group", "instance",
                 "mode")  # fmt: skip
#: The arguments of one job in a ``hero_submit_many`` call (hero.lua ``SUBMIT_WIDTH``).
SUBMIT_WIDTH = 2 + len(SUBMIT_FIELDS)


def submit_many(
    start: bool, jobs: Sequence[tuple[JobSpec, str]]
) -> Call[list[Transition | Refused]]:
    """Create (and ``start``) each job, given with the queue it goes to: its
    own Transition, in order; a job Redis failed on is Refused. Each job's
    fields are arguments of their own (``SUBMIT_FIELDS``), which hero.lua
    writes as they come, rather than a JSON text it would decode."""
    args: list[Arg] = ["1" if start else "0"]
    for job, queue in jobs:
        prerequisites = strings_json(list(job.prerequisites)) if job.prerequisites else "[]"
        env = compact_json(dict(job.env_vars)) if job.env_vars else "{}"
        args += [job.job_id, prerequisites, job.script, job.script_type, job.caller_id,
                 job.context_id, job.worker_id, str(job.priority), str(job.timeout),
                 str(job.retries), env, queue, job.group, job.instance,
                 "stream" if job.stream else ""]  # fmt: skip
    return Call("hero_submit_many", tuple(args), _each)


#: A job to start, and the caller it must belong to (None: any; see ``stop``).
Start = tuple[str, str | None]


def start_many(starts: Sequence[Start]) -> Call[list[Transition | Refused]]:
    """Start each created job: its own Transition (or refusal), in order, as
    one call per job would have answered; a job Redis failed on is Refused,
    one of another caller than the one named is not_found."""
    args = tuple(arg for job_id, caller_id in starts for arg in (job_id, caller_id or ""))
    return Call("hero_start_jobs", args, _each)


def stop(job_id: str, caller_id: str | None = None) -> Call[Transition]:
    """Stop the job; with ``caller_id``, only a job of that caller (else not_found)."""
    return Call("hero_stop", _of(job_id, caller_id), lambda r: _transition(_rows(r)))


def delete(job_id: str, caller_id: str | None = None) -> Call[bool]:
    """Delete the job (a started one is stopped first); ``caller_id``: only that caller's."""
    return Call("hero_delete", _of(job_id, caller_id), _bool)


def _of(job_id: str, caller_id: str | None) -> tuple[str, ...]:
    """A job's arguments, and the caller it must be of ("" or None: any; hero.lua ``callers``)."""
    return (job_id, caller_id) if caller_id else (job_id,)


def reconcile(job_id: str) -> Call[bool]:
    """Catch up with an end an outside actor wrote into the hash; whether it did."""
    return Call("hero_reconcile", (job_id,), _bool)


def dlq_replay(script_type: str, job_ids: Sequence[str]) -> Call[list[str]]:
    return Call("hero_dlq_replay", (script_type, *job_ids),
                lambda r: [str(j) for j in _rows(r)])  # fmt: skip


# -- actors -------------------------------------------------------------------


def _cycle_reply(reply: Reply) -> CycleReply:
    """``[settle_ms, *row, *row, ...]``: the rows come flat, CLAIMED_WIDTH values
    each (one array instead of one per row costs Redis less to send)."""
    settle_ms, *flat = _rows(reply)
    rows = (flat[i : i + CLAIMED_WIDTH] for i in range(0, len(flat), CLAIMED_WIDTH))
    return CycleReply(tuple(Claimed.from_row(row) for row in rows), int(settle_ms or 0))


@dataclass(frozen=True)
class Actor:
    """Who cycles: the actor's name, control queue, presence key, the channel
    its handed jobs are published on (lists only) and, in stream mode, its
    consumer name."""

    name: str
    ctl: str
    lease: str
    handoff: str = ""
    consumer: str = ""
    sandbox_off: bool = False


def cycle(
    actor: Actor,
    key_names: Sequence[str],
    *,
    want: int,
    outcomes: Sequence[Outcome],
    attempts: Sequence[int],
    reclaim_idle_ms: int,
    offer: bool,
    holding: int,
    outside_grace_ms: int,
) -> Call[CycleReply]:
    """Report ``outcomes`` (each with the attempt Redis checks it against, 0: none,
    in ``attempts``) and claim up to ``want`` jobs. ``offer``: the slots left free
    are offered for handoffs on ``actor.handoff``. ``holding``: the jobs in hand
    but ``outcomes``, so jobs handed over and not yet received count against ``want``."""
    args: list[Arg] = [actor.name, actor.ctl, actor.lease, want, actor.consumer, reclaim_idle_ms,
                       actor.handoff if offer else "", outside_grace_ms,
                       "off" if actor.sandbox_off else "", holding, len(outcomes)]  # fmt: skip
    for o in outcomes:
        args += [o.job_id, o.status, o.output, o.error, o.log_path, o.entry]
    args += attempts  # after the rest: a library without them reads as before
    args += [o.run for o in outcomes]
    return Call("hero_cycle", tuple(args), _cycle_reply, tuple(key_names))


def log(
    job_id: str,
    actor: str,
    attempt: int,
    lines: str,
    progress: tuple[float, str] | None,
    cap: int,
    tail: str,
    run: str = "",
) -> Call[bool]:
    """A running job's new log lines and latest progress (see hero_log); False:
    nothing written, the job is no longer ``actor``'s ``attempt`` and ``run``."""
    fraction, message = (repr(progress[0]), progress[1]) if progress else ("", "")
    args = (job_id, actor, lines, fraction, message, cap, tail, attempt, run)
    return Call("hero_log", args, _bool)


def stream_touch(stream: str, consumer: str) -> Call[int]:
    return Call("hero_stream_touch", (consumer,), _int, (stream,))


def stream_leave(stream: str, consumer: str) -> Call[int]:
    return Call("hero_stream_leave", (consumer,), _int, (stream,))


# -- maintenance ----------------------------------------------------------------


def lead(holder: str, ttl_ms: int) -> Call[bool]:
    return Call("hero_lead", (holder, ttl_ms), _bool)


def watch(ttl_ms: int, gap_ms: int) -> Call[int]:
    """The ms Redis was out of reach (0: it was not): more than ``gap_ms``
    since the last tick's stamp."""
    return Call("hero_watch", (ttl_ms, gap_ms), _int)


def reap(lease: str, held: str, max_deaths: int, ttl_ms: int) -> Call[int]:
    return Call("hero_reap", (lease, max_deaths, ttl_ms), _int, (held,))


def promote() -> Call[int]:
    return Call("hero_promote", (), _int)


def expire(grace_ms: int, limit: int) -> Call[int]:
    return Call("hero_expire", (grace_ms, limit), _int)


def abandon(created_ms: int, limit: int) -> Call[int]:
    """Stop the oldest ``limit`` jobs still created ``created_ms`` after they were."""
    return Call("hero_abandon", (created_ms, limit), _int)


def prune(limit: int) -> Call[int]:
    return Call("hero_prune", (limit,), _int)


def stream_prune(stream: str, idle_ms: int) -> Call[int]:
    return Call("hero_stream_prune", (idle_ms,), _int, (stream,))
