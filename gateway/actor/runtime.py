"""The actor runtime and its SDK.

    actor = Actor(config, group="gpu", instance="a1", concurrency=4)

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        return do_work(ctx.job.script)

    actor.run()

Each registered script type gets its own link to the supervisor and its own
loop: claim up to ``concurrency`` jobs, run them as tasks, and report each
batch of outcomes in the same round trip that claims the next jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from redis.exceptions import ResponseError

from gateway import eventloop, logs
from gateway.actor import logfiles
from gateway.actor.context import JobContext, JobFailed
from gateway.actor.joblog import JobLog, LogUnwritable
from gateway.actor.livelog import LiveLog
from gateway.actor.python_exec import PythonExecutor
from gateway.config import Config
from gateway.model import Claimed, Outcome
from gateway.paths import state_dir
from gateway.supervisor.connection import UNAVAILABLE, RedisRefused, user_of
from gateway.supervisor.retention import JobLookup
from gateway.supervisor.worker import ActorLink

log = logging.getLogger("gateway.actor")

Handler = Callable[[JobContext], Awaitable[str] | str]


class Actor:
    def __init__(
        self,
        config: Config,
        *,
        group: str | None = None,
        instance: str | None = None,
        concurrency: int = 1,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.config = config
        self.group = group or "default"
        self.instance = instance or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.log_dir = Path(config.log_dir) if config.log_dir else state_dir() / "logs"
        self._log_prefix = os.path.join(self.log_dir, "")  # + logfiles.file_name: a job's log
        self._handlers: dict[str, Handler] = {}
        self._stopping = asyncio.Event()
        self._links: set[ActorLink] = set()  # woken by stop()

    def handler(self, script_type: str) -> Callable[[Handler], Handler]:
        """Register the function that runs jobs of ``script_type`` (async or sync)."""

        def register(fn: Handler) -> Handler:
            self._handlers[script_type] = fn
            return fn

        return register

    def stop(self) -> None:
        """Finish running jobs, report them, and return from ``serve``."""
        self._stopping.set()
        for link in self._links:
            link.poke()

    def run(self) -> None:
        if not logging.getLogger().handlers:  # an SDK script's actor still says it is ready
            logs.setup(self.config.log_level, self.config.log_format)
        eventloop.run(self._run_until_signal(), self.config.event_loop)

    async def _run_until_signal(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        await self.serve()

    async def serve(self) -> None:
        if not self._handlers:
            raise RuntimeError("no handler registered; use @actor.handler(script_type)")
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # said as the setting to change, not as where it failed
            what = f"cannot make the folder for job logs (--log-dir, HERO_LOG_DIR): {exc.strerror}"
            raise OSError(exc.errno, what, str(self.log_dir)) from None
        self._stopping.clear()
        sweeping = asyncio.create_task(self._sweep_logs(), name="actor-log-sweep")
        try:
            await asyncio.gather(
                *(self._serve_type(i, t, h) for i, (t, h) in enumerate(self._handlers.items()))
            )
        finally:
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
            for handler in self._handlers.values():
                if isinstance(handler, PythonExecutor):
                    await handler.aclose()

    async def _serve_type(self, index: int, script_type: str, handler: Handler) -> None:
        jobs = _InFlight()
        unconfined = isinstance(handler, PythonExecutor) and handler.sandbox is None
        link = ActorLink(
            self.config, script_type, self.group, self.instance, index=index, on_stop=jobs.stop,
            sandbox_off=unconfined,
        )  # fmt: skip
        if not await self._connect(link):
            return
        log.info(
            "actor ready",
            extra={"script_type": script_type, "actor": link.name, "concurrency": self.concurrency,
                   "redis_user": user_of(self.config.redis)},
        )  # fmt: skip
        self._links.add(link)
        jobs.start = lambda job: self._execute(link, handler, job)
        jobs.on_done = link.poke
        try:
            await self._cycle_until_stopped(link, jobs)
        finally:
            self._links.discard(link)
            await link.close()
            log.info("actor stopped", extra={"script_type": script_type, "actor": link.name})

    async def _cycle_until_stopped(self, link: ActorLink, jobs: _InFlight) -> None:
        """Report what ended and claim up to ``concurrency`` more, one round trip
        a cycle; wait for work when there is nothing to report and no claim is
        due (a job handed over is not one: the slots offered for it stand, so
        the cycle that reports it is the next). Once stopping: claim nothing,
        let the running jobs end, report them, withdraw, and run what was
        handed over meanwhile before leaving."""
        refused = 0.0  # seconds until the next try of a cycle Redis refused
        while True:
            is_stopping = self._stopping.is_set()
            idle = not jobs.running and not jobs.done
            if is_stopping and link.offering and not idle:  # no job for a stopping actor
                with contextlib.suppress(*UNAVAILABLE, ResponseError):
                    await link.withdraw()
            if is_stopping and idle:  # refused or lost: the reaper re-dispatches
                with contextlib.suppress(*UNAVAILABLE, ResponseError):
                    await link.withdraw()
                    jobs.launch(link.handed())  # handed over just before we withdrew
                    jobs.launch(await link.adopt())
                if not jobs.running:
                    return
                continue
            jobs.launch(link.handed())
            want = 0 if is_stopping else self.concurrency - len(jobs.running)
            if jobs.done or (want and link.claim_due):
                outcomes, jobs.done = jobs.done, []
                jobs.ended.clear()  # one ending from here on is to report
                try:
                    if link.adopt_due:  # held jobs of an earlier process with this name
                        # (or of a lost cycle); those ended and not reported are in hand too
                        jobs.launch(await link.adopt())
                        want = min(want, max(self.concurrency - len(jobs.running), 0))
                    claimed = await link.cycle(outcomes, want, accept_handoff=not is_stopping)
                except (*UNAVAILABLE, ResponseError) as exc:
                    # sent again: one Redis recorded already is passed over
                    # (a later attempt of its job included, by its attempt)
                    jobs.done[:0] = outcomes
                    if is_stopping and isinstance(exc, ResponseError) and not jobs.running:
                        refused_at_stop(link.name, outcomes, exc)
                        return
                    link.adopt_due = True  # the cycle's reply, with claimed jobs, was lost
                    link.claim_due = link.claim_due or want > 0  # its claim is still to make
                    refused = refused_again(refused, exc, link.name)
                    await self._pause(refused or 0.5, jobs.ended)
                    continue
                refused = 0.0
                jobs.launch(claimed)
            room = not is_stopping and len(jobs.running) < self.concurrency
            if jobs.done or link.has_handed() or (room and link.claim_due):
                continue  # arrived while cycling (the cycle cleared their wake-up), or more queued
            if is_stopping and not jobs.running:
                continue  # reported the last ones: leave (at the top)
            await link.wait_for_work()  # stop() wakes it too

    async def _pause(self, seconds: float, ended: asyncio.Event) -> None:
        """Wait before another try of a cycle, cut short by ``stop``; once
        stopping, by one of its jobs ending (``ended``), whose report is then
        tried at once rather than after the backoff. A stopping actor's tries
        do not spin: it tries again at most once per job that ends."""
        wake = ended if self._stopping.is_set() else self._stopping
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)

    async def _sweep_logs(self) -> None:
        """Remove expired jobs' log files now and every ``logfiles.SWEEP_EVERY``
        seconds, on a connection of its own opened only for the sweep."""
        if self.config.job_ttl <= 0:
            return
        while True:
            lookup = JobLookup(self.config)
            try:
                await logfiles.sweep(str(self.log_dir), self.config.job_ttl, lookup.present)
            except (*UNAVAILABLE, ResponseError) as exc:  # the next sweep tries again
                log.warning("cannot sweep the job logs", extra={"error": str(exc)})
            except Exception:  # a sweep never stops the actor serving jobs
                log.exception("sweeping the job logs failed")
            finally:
                await lookup.aclose()
            await asyncio.sleep(logfiles.SWEEP_EVERY)

    async def _connect(self, link: ActorLink) -> bool:
        """Open the link, waiting out a Redis that is not up yet (with backoff).
        A refusal (wrong password, no such database) raises: no wait fixes it."""
        delay = 0.1
        while not self._stopping.is_set():
            try:
                await link.open()
                return True
            except RedisRefused:
                await link.close()
                raise
            except UNAVAILABLE:
                log.warning("redis unavailable; retrying", extra={"retry_in": round(delay, 2)})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, 5.0)
        await link.close()
        return False

    async def _execute(self, link: ActorLink, handler: Handler, job: Claimed) -> Outcome:
        log_path = self._log_prefix + logfiles.file_name(job.job_id, job.run)  # no pathlib
        joblog = JobLog(log_path, self.config.job_max_log)
        ctx = JobContext(job, joblog)

        async def report(lines: str, progress: tuple[float, str] | None, tail: str) -> bool:
            return await link.report_output(
                job.job_id, lines, progress, attempt=job.attempt, run=job.run,
                cap=joblog.tail_size, tail=tail,
            )  # fmt: skip

        ctx.live = LiveLog(joblog, report)
        ctx.live.start()
        deadline = asyncio.get_running_loop().time() + job.timeout
        try:
            value = handler(ctx)
            if inspect.isawaitable(value):  # a sync handler blocks the loop: no timer can stop it
                async with asyncio.timeout_at(deadline):
                    value = await value
            end = ("finished", str(value or ""), "", log_path)
        except TimeoutError:
            end = ("timeout", "", f"timed out after {job.timeout}s", log_path)
        except asyncio.CancelledError:
            end = ("stopped", "", "stopped", log_path)
        except JobFailed as exc:
            end = ("error", exc.output, str(exc), log_path)
        except LogUnwritable:
            log.exception("cannot open the job's log", extra={"job_id": job.job_id})
            end = ("error", "", "the actor cannot write the job's log", "")
        except Exception as exc:
            log.exception("handler failed", extra={"job_id": job.job_id})
            end = ("error", "", f"{type(exc).__name__}: {exc}", log_path)
        finally:
            joblog.close()
        await ctx.live.close(tail=ctx.logs())  # whatever the job logged, however it ended
        return job.ended(*end)


def refused_again(delay: float, exc: Exception, actor: str) -> float:
    """The wait before the next try of a cycle (0 when Redis was out of reach:
    its own short wait). A cycle Redis refused as a whole is not one job's
    (each job's part fails alone): a key of the protocol someone made another
    type, which an operator has to mend. Until then the actor keeps its jobs
    and their outcomes, says why at every try, and tries again at most every
    ``REFUSED_MAX`` seconds, where it once exited."""
    if not isinstance(exc, ResponseError):
        return 0.0
    delay = min(max(delay * 2, REFUSED_FIRST), REFUSED_MAX)
    log.error(
        "redis refused the actor's cycle; its jobs are kept and it tries again",
        extra={"actor": actor, "error": str(exc), "retry_in": delay},
    )
    return delay


def refused_at_stop(actor: str, outcomes: Sequence[Outcome], exc: ResponseError) -> None:
    """A stopping actor whose cycle Redis refuses leaves once no job of it
    runs: another try would be refused too, and a stop must end. Reports
    Redis recorded before the refusal stand; the others' jobs stay in its
    held list, for the reaper to run again once its presence lapses."""
    log.error(
        "redis refused the stopping actor's cycle; it leaves its reports to the reaper",
        extra={"actor": actor, "error": str(exc), "job_ids": [o.job_id for o in outcomes]},
    )


#: The first and the longest wait before another try of a refused cycle, seconds.
REFUSED_FIRST = 0.5
REFUSED_MAX = 10.0


def python_actor(
    config: Config, *, group: str | None = None, instance: str | None = None, concurrency: int = 1
) -> Actor:
    """An actor that runs ``python`` jobs in the sandboxed python executor.
    Raises SandboxUnavailable where the sandbox cannot work (unless HERO_SANDBOX=off)."""
    actor = Actor(config, group=group, instance=instance, concurrency=concurrency)
    executor = PythonExecutor(config, warm=concurrency)
    confinement = executor.describe()
    if executor.sandbox is None:
        log.warning("python jobs run WITHOUT a sandbox (HERO_SANDBOX=off)", extra=confinement)
    else:
        log.info("python job sandbox", extra=confinement)
    actor.handler("python")(executor)
    return actor


#: Stop requests kept for runs not launched yet, the oldest dropped first.
EARLY_STOPS = 1024


class _InFlight:
    """One link's jobs in flight: the tasks running them, and the outcomes of
    those that ended, waiting for the next cycle to report them. Runs are
    kept by job id and run token: a job deleted (and stopped) may still be
    ending while a job created again under its id runs here too."""

    def __init__(self) -> None:
        self.running: dict[tuple[str, str], asyncio.Task[Outcome]] = {}
        self._early: dict[tuple[str, str], None] = {}  # stops of runs not launched yet, in order
        self.done: list[Outcome] = []
        self.ended = asyncio.Event()  # a job ended since the last cycle took ``done``
        #: Set once the link is open: runs one job; called when one ended.
        self.start: Callable[[Claimed], Coroutine[Any, Any, Outcome]] | None = None
        self.on_done: Callable[[], None] = lambda: None

    def launch(self, jobs: list[Claimed]) -> None:
        assert self.start is not None
        for job in jobs:
            task = asyncio.create_task(self.start(job))
            if (job.job_id, job.run) in self._early:  # stopped on its way here
                del self._early[job.job_id, job.run]
                task.cancel()
            self.running[job.job_id, job.run] = task
            task.add_done_callback(functools.partial(self._finished, job))

    def stop(self, job_id: str, run: str = "") -> None:
        """A stop request: cancel the job's task (its outcome is ``stopped``);
        with a ``run``, only that run's (not a later run of the id). A run not
        started here yet (handed over, its message or claim reply still on its
        way) is remembered, and stopped as it is launched."""
        if run:
            task = self.running.get((job_id, run))
            tasks = [task] if task is not None else []
        else:  # a Hero message: any run of the id
            tasks = [t for (running_id, _), t in self.running.items() if running_id == job_id]
        for task in tasks:
            log.info("stopping job", extra={"job_id": job_id})
            task.cancel()
        if not tasks and run:
            self._early[job_id, run] = None
            while len(self._early) > EARLY_STOPS:  # stops of runs that never come here
                del self._early[next(iter(self._early))]

    def _finished(self, job: Claimed, task: asyncio.Task[Outcome]) -> None:
        self.running.pop((job.job_id, job.run), None)
        if task.cancelled():  # stopped before it even began
            self.done.append(job.ended("stopped", error="stopped"))
        else:
            self.done.append(task.result())
        self.ended.set()
        self.on_done()
