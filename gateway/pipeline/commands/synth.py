"""``hero-gateway pipeline synth``: simulate queues and write their events (files or stream)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import redis
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gateway import config
from gateway.errors import BackendUnavailable, InvalidParams
from gateway.pipeline import synth
from gateway.pipeline.commands.common import err, folder, guard, out, output_dir, redis_client
from gateway.pipeline.timeparse import parse_time


def run_synth(args: argparse.Namespace) -> int:
    return guard(lambda: _synth(_settings(args)))


def _settings(args: argparse.Namespace) -> config.Config:
    """The settings; a Redis (that of a running ``dev`` when none is named) only if
    the events go there, so writing files never depends on a dev record."""
    cfg = config.resolve(args, dev_redis=False)
    return config.resolve(args) if cfg.synth_to_redis else cfg


def _spec(cfg: config.Config) -> synth.SynthSpec:
    """The simulation the settings ask for; a usage error if they do not make one."""
    now = int(time.time() * 1000)
    span_ms = cfg.synth_jobs / cfg.synth_rate * 1000  # infinite for a rate of 1e-320
    if not cfg.synth_start and span_ms > now:  # the default start is jobs/rate before now
        raise InvalidParams(
            f"--jobs {cfg.synth_jobs} at --rate {cfg.synth_rate} per second would start "
            "before 1970: lower --jobs, raise --rate or give --start"
        )
    start = parse_time(cfg.synth_start, now) if cfg.synth_start else now - round(span_ms)
    try:
        return synth.SynthSpec(
            jobs=cfg.synth_jobs,
            rate=cfg.synth_rate,
            service_mean=cfg.synth_service_mean,
            actors=cfg.synth_actors,
            distribution=cfg.synth_distribution,
            script_types=cfg.synth_script_types,
            group=cfg.synth_group,
            error_rate=cfg.synth_error_rate,
            max_attempts=cfg.synth_max_attempts,
            seed=cfg.synth_seed,
            start_ms=start,
        )
    except ValueError as exc:
        raise InvalidParams(str(exc)) from None


def _synth(cfg: config.Config) -> int:
    spec = _spec(cfg)
    if spec.offered_load >= spec.actors:
        err.print(
            f"[yellow]warning:[/yellow] offered load {spec.offered_load:.3g} >= {spec.actors} "
            "actors: the queue is unstable and waits grow for the whole run",
            highlight=False,
        )
    client = redis_client(cfg.redis) if cfg.synth_to_redis else None
    target = Path(folder(cfg.synth_out, "events"))
    if client is None:
        output_dir(target)
    with err.status("simulating the queue", spinner="dots"):
        try:
            events, totals = synth.simulate(spec)
        except synth.OutOfTime as exc:
            raise InvalidParams(f"{exc}: raise --rate or lower --jobs or --service-mean") from None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("XADD" if client else "writing Parquet", total=len(events))

        def advance(n: int) -> None:
            bar.advance(task, n)

        if client is not None:
            try:
                synth.xadd(spec, events, client, progress=advance)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                raise BackendUnavailable("Redis went away while adding events") from exc
            finally:
                client.close()
            where = "the events stream"
        else:
            rows = cfg.synth_rows_per_file
            files = synth.write_parquet(spec, events, target, rows_per_file=rows, progress=advance)
            where = f"{len(files):,} file{'' if len(files) == 1 else 's'} under {target}"
    out.print(
        f"{totals.events:,} events for {totals.jobs:,} jobs into {where}: "
        f"{totals.attempts:,} attempts, {totals.finished:,} finished, {totals.errors:,} errors, "
        f"{totals.retries:,} retries, {totals.dlq:,} dlq; offered load "
        f"{spec.offered_load:.3g} on {spec.actors} actors per type",
        highlight=False,
    )
    return 0
