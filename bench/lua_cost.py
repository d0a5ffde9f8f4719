"""What a job costs Redis inside hero.lua, counted in instructions rather than timed.

The job path's Functions are called directly, in a fixed order, on a private
redis-server: no gateway, no actor process, nothing that races. Each round:

- ``queued`` (no idle actor): ``hero_submit_many`` of ``--batch`` jobs, their
  ``hero_start_jobs`` (into the work queue), a ``hero_cycle`` that claims
  them, and a ``hero_cycle`` that reports them finished: the WebSocket
  batches' path (``job.create`` then ``job.start``);
- ``handed`` (an idle actor offers its slots): a ``hero_cycle`` that offers
  ``--batch`` slots, the submit, the start (each job handed straight to the
  actor, marked started), and the report. A real actor offers in the cycle
  that reports; here the offer is a call of its own, so it is counted apart;
- ``run``: one ``hero_submit_many`` that creates and starts the jobs (as
  ``Supervisor.submit_many``, the in-process bench's producer, and
  ``job.run`` do), then the claim and the report as in ``queued``.

Every job's script is a few bytes and its actor's names are short, so each
job hash stays a listpack, as the benchmarks' jobs do (docs/performance.md).

With valgrind installed, redis-server runs under callgrind, which counts the
instructions it executes inside each ``FCALL`` (``--toggle-collect`` and one
dump per call). The machine's load does not move the count, and one run
gives what the last did within about 1 % per phase (Redis seeds its hash
functions and skiplist levels at random), so two trees are compared by
running this in each and a change of 1 % shows; timing the whole path on
these shared machines cannot see 5 %. Without valgrind (or with ``--cpu``)
it prints Redis's own CPU time per job instead (``INFO cpu``), which moves
with the machine's load.

Commands per job come from ``INFO commandstats``, per phase.

    .venv/bin/python bench/lua_cost.py                 # every mode, batches of 32
    .venv/bin/python bench/lua_cost.py --batch 1 --jobs 256
    .venv/bin/python bench/lua_cost.py --cpu --jobs 20000
    .venv/bin/python bench/lua_cost.py --redis-config hash-max-listpack-entries=16
    .venv/bin/python bench/lua_cost.py --library /tmp/variant.lua   # an experiment

"memory left per ended job" is what Redis's ``used_memory`` grew by over the
counted rounds, per job: the ended job's hash, its index entries, its events
and reply, all retained (``HERO_JOB_TTL``).

Under callgrind Redis runs about fifty times slower: the defaults (1,024 jobs
a mode, after a warm-up of 256 that is not counted) take 20 to 40 seconds a
mode.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.model import library as lib
from gateway.model.claim import CycleReply, Outcome
from gateway.model.job import JobSpec
from gateway.supervisor import keys
from gateway.supervisor.library import source

from common import redis_cpu

R = TypeVar("R")
PHASES = ("offer", "submit", "start", "claim", "report")
MODES = ("queued", "handed", "run")
SCRIPT_TYPE, GROUP, INSTANCE = "python", "default", "lua-cost"
WARM_UP = 256  # jobs before counting starts: the library loaded, the keys made


@dataclass
class Tally:
    """What one mode's counted rounds cost, per phase."""

    jobs: int = 0
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    commands: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    instructions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    #: Redis's used_memory grown by the counted rounds: what each job leaves
    #: (its hash, index entries, events, reply), ended jobs being retained.
    memory_bytes: int = 0


def under_callgrind(work: Path) -> list[str]:
    """valgrind's argv for a redis-server whose instructions are counted only
    inside FCALL, one dump file per call (cg.out.1, .2, ...), from the moment
    `instrument` says so (the warm-up before is not counted)."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--toggle-collect=fcallCommand",
        "--dump-after=fcallCommand",
        f"--callgrind-out-file={work / 'cg.out'}",
    ]


def instrument(server: EmbeddedRedis) -> None:
    """From here on, callgrind counts."""
    assert server.process is not None
    subprocess.run(
        ["callgrind_control", "-i", "on", str(server.process.pid)],
        check=True,
        capture_output=True,
    )


def dumps(work: Path) -> list[int]:
    """Instructions of each FCALL counted, in the order they ran."""
    files = sorted(work.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
    counts = []
    for path in files:
        found = re.search(r"^summary: (\d+)", path.read_text(), re.MULTILINE)
        counts.append(int(found.group(1)) if found else 0)
    return counts


class Rounds:
    """The job path's Functions in a fixed order, each call noted by phase."""

    def __init__(self, client: redis.Redis, config: Config, mode: str) -> None:
        self.config, self.mode, self.client = config, mode, client
        self.handed = handed = mode == "handed"
        self.actor = lib.Actor(
            name=f"{SCRIPT_TYPE}:{GROUP}:{INSTANCE}",
            ctl=keys.ctl(SCRIPT_TYPE, GROUP, INSTANCE),
            lease=keys.presence(SCRIPT_TYPE, GROUP, INSTANCE),
            handoff=f"{keys.PREFIX}:lua-cost:handoff" if handed else "",
        )
        self.client.set(self.actor.lease, "{}")  # an actor's presence: offers need it
        self.cycle_keys = [
            keys.held(SCRIPT_TYPE, GROUP, INSTANCE),
            keys.idle(SCRIPT_TYPE),
            *keys.pop_order(SCRIPT_TYPE, GROUP, INSTANCE),
        ]
        self.order: list[str] = []  # the phase of each FCALL, in order
        self.tally = Tally()

    def call(self, phase: str, fcall: lib.Call[R], counting: bool) -> R:
        if not counting:
            return fcall.decode(lib.Reply(self.client.execute_command(*fcall.command(self.config))))
        commands, cpu = self._commands(), self._cpu()  # the CPU read last before the call
        reply = self.client.execute_command(*fcall.command(self.config))
        cpu, commands = self._cpu() - cpu, self._commands() - commands  # ... and first after
        self.order.append(phase)
        self.tally.calls[phase] += 1
        self.tally.commands[phase] += commands - 1  # the FCALL itself
        self.tally.cpu_s[phase] += cpu
        return fcall.decode(lib.Reply(reply))

    def _commands(self) -> int:
        """Commands Redis has run, INFO left out (FCALL and those it ran counted)."""
        stats: dict[str, Any] = self.client.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if not k.startswith("cmdstat_info"))

    def _cpu(self) -> float:
        return redis_cpu(self.client)

    def cycle(self, phase: str, counting: bool, **kw: Any) -> CycleReply:
        defaults: dict[str, Any] = {
            "want": 0,
            "outcomes": [],
            "reclaim_idle_ms": 0,
            "offer": False,
            "holding": 0,
            "outside_grace_ms": 2000,
        }
        args = {**defaults, **kw}
        args["attempts"] = [o.attempt for o in args["outcomes"]]
        return self.call(phase, lib.cycle(self.actor, self.cycle_keys, **args), counting)

    def run(self, tag: str, jobs: int, batch: int, counting: bool) -> None:
        for first in range(0, jobs, batch):
            specs = [
                JobSpec(script=f"out-{tag}-{i}", script_type=SCRIPT_TYPE, job_id=f"{tag}-{i:06d}")
                for i in range(first, first + batch)
            ]
            if self.handed:
                self.cycle("offer", counting, want=batch, offer=True)
            queued = [(s, keys.dispatch_queue(s)) for s in specs]
            together = self.mode == "run"
            self.call("submit", lib.submit_many(together, queued), counting)
            if not together:
                self.call("start", lib.start_many([(s.job_id, None) for s in specs]), counting)
            if self.handed:  # published to the actor; its rows read back as an adopt would
                outcomes = [self._handed_outcome(s) for s in specs]
            else:
                claimed = self.cycle("claim", counting, want=batch).claimed
                outcomes = [c.ended("finished", c.script) for c in claimed]
            if len(outcomes) != batch:
                raise RuntimeError(f"{len(outcomes)} of {batch} jobs reached the actor")
            self.cycle("report", counting, outcomes=outcomes)
            if counting:
                self.tally.jobs += batch

    def _handed_outcome(self, spec: JobSpec) -> Outcome:
        """The end of a job handed off, as its run reports it (its script as output)."""
        job = keys.job(spec.job_id)
        status, run, attempt = self.client.hmget(job, "status", "run", "attempt")
        if status != b"started":
            raise RuntimeError(f"job {spec.job_id} was not handed to the actor: {status!r}")
        return Outcome(spec.job_id, "finished", spec.script, attempt=int(attempt), run=run.decode())


def measure(
    mode: str,
    jobs: int,
    batch: int,
    *,
    callgrind: bool,
    settings: Sequence[str],
    library: str,
    warm_up: int = WARM_UP,
) -> Tally:
    with tempfile.TemporaryDirectory(prefix="lua-cost-") as tmp:
        work = Path(tmp)
        server = EmbeddedRedis(
            work,
            appendonly=False,
            settings={name: value for name, _, value in (s.partition("=") for s in settings)},
            wrapper=under_callgrind(work) if callgrind else (),
        )
        server.start(timeout=60)  # under callgrind Redis starts in seconds
        client = redis.Redis.from_url(server.url, socket_timeout=600)
        try:
            config = Config(redis_url=server.url)
            client.execute_command("FUNCTION", "LOAD", "REPLACE", library)
            rounds = Rounds(client, config, mode)
            rounds.run("warm", warm_up, batch, counting=False)
            if callgrind:
                instrument(server)
            memory = int(client.info("memory")["used_memory"])
            rounds.run("job", jobs, batch, counting=True)
            rounds.tally.memory_bytes = int(client.info("memory")["used_memory"]) - memory
        finally:
            client.close()
            server.stop(timeout=60)
        if callgrind:
            counts = dumps(work)
            if len(counts) != len(rounds.order):
                raise RuntimeError(f"{len(counts)} callgrind dumps for {len(rounds.order)} calls")
            for phase, n in zip(rounds.order, counts, strict=True):
                rounds.tally.instructions[phase] += n
        return rounds.tally


def setting(text: str) -> str:
    """A ``--redis-config`` as given, when it is NAME=VALUE (argparse's check)."""
    name, eq, _ = text.partition("=")
    if not name or not eq:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return text


def can_count() -> bool:
    """Whether instructions can be counted here (valgrind installed); else timed."""
    return shutil.which("valgrind") is not None


def figures(tally: Tally, callgrind: bool) -> dict[str, Any]:
    """One mode's figures per job: each phase's calls, commands and cost
    (instructions, or Redis CPU µs), the whole job's, and the memory left."""
    n = tally.jobs

    def row(calls: float, commands: float, cost: float) -> dict[str, float]:
        return {"calls": calls / n, "commands": commands / n, "cost": cost / n}

    costs = tally.instructions if callgrind else {k: v * 1e6 for k, v in tally.cpu_s.items()}
    phases = {
        phase: row(tally.calls[phase], tally.commands[phase], costs[phase])
        for phase in PHASES
        if tally.calls[phase]
    }
    whole = row(sum(tally.calls.values()), sum(tally.commands.values()), sum(costs.values()))
    return {"jobs": n, "phases": phases, "job": whole, "memory_bytes": tally.memory_bytes / n}


def cost(
    jobs: int,
    batch: int = 32,
    *,
    callgrind: bool,
    settings: Sequence[str] = (),
    library: str | None = None,
    modes: Sequence[str] = MODES,
    warm_up: int = WARM_UP,
) -> dict[str, Any]:
    """Each mode's figures (``figures``), counted by callgrind or timed."""
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    text = library or source()
    jobs -= jobs % batch
    return {
        "unit": "instructions" if callgrind else "Redis CPU µs",
        "batch": batch,
        "redis": version.stdout.strip(),
        "settings": list(settings),
        "modes": {
            mode: figures(
                measure(
                    mode,
                    jobs,
                    batch,
                    callgrind=callgrind,
                    settings=settings,
                    library=text,
                    warm_up=warm_up,
                ),
                callgrind,
            )
            for mode in modes
        },
    }


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows, one column pair per mode (bench/report.py puts them in RESULTS.md)."""
    modes: dict[str, dict[str, Any]] = result["modes"]
    unit = result["unit"]
    jobs = next(iter(modes.values()))["jobs"]
    head = "| phase | " + " | ".join(f"{m}: commands | {m}: {unit}" for m in modes) + " |"
    rows = [
        "## What a job costs inside the Functions (bench/lua_cost.py)",
        "",
        f"The job path's Functions called directly in a fixed order, batches of "
        f"{result['batch']}, {jobs} jobs per mode; per job. {result['redis']}; settings: "
        f"{' '.join(result['settings']) or 'defaults'}. "
        + (
            "Counted by callgrind: the load does not move it."
            if unit == "instructions"
            else "Timed, not counted: this moves with the load."
        ),
        "",
        head,
        "| --- |" + " ---: | ---: |" * len(modes),
    ]
    for phase in (*PHASES, "job"):
        cells = []
        for figs in modes.values():
            f = figs["job"] if phase == "job" else figs["phases"].get(phase)
            cells += [f"{f['commands']:.2f}", f"{f['cost']:,.0f}"] if f else ["—", "—"]
        if any(c != "—" for c in cells):
            rows.append(f"| {phase} | " + " | ".join(cells) + " |")
    memory = " | ".join(f" | {figs['memory_bytes']:,.0f} bytes" for figs in modes.values())
    rows.append(f"| memory left per ended job |{memory} |")
    return [*rows, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1024, help="jobs counted per mode (default 1024)")
    p.add_argument("--batch", type=int, default=32, help="jobs per Function call (default 32)")
    p.add_argument("--mode", choices=(*MODES, "all"), default="all")
    p.add_argument(
        "--warm-up", type=int, default=WARM_UP, help=f"jobs run before counting (default {WARM_UP})"
    )
    p.add_argument("--cpu", action="store_true", help="time Redis's CPU instead of callgrind")
    p.add_argument(
        "--redis-config",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a redis-server setting, e.g. hash-max-listpack-entries=16 (repeatable)",
    )
    p.add_argument(
        "--library",
        type=Path,
        help="load this library text instead of the tree's hero.lua as rendered "
        "(an experiment: the Functions' arguments must be this tree's)",
    )
    a = p.parse_args(argv)
    if a.jobs < a.batch or a.batch < 1 or a.batch > 100 or a.warm_up < 0:
        p.error("--batch must be 1..100, --jobs at least one batch, --warm-up not negative")
    callgrind = not a.cpu and can_count()
    if not a.cpu and not callgrind:
        print("valgrind not found: timing Redis's CPU instead (this moves with the load)")
    modes = MODES if a.mode == "all" else (a.mode,)
    library = a.library.read_text() if a.library else None
    result = cost(
        a.jobs,
        a.batch,
        callgrind=callgrind,
        settings=a.redis_config,
        library=library,
        modes=modes,
        warm_up=a.warm_up,
    )
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
