"""``hero-gateway archive`` and ``hero-gateway pipeline run|synth``.

``add_commands(subparsers)`` registers the commands on the gateway's CLI; each
parser sets ``func(args) -> int``. Bad input (a missing folder, no events, a
malformed time, Redis down) is reported in one line on stderr with exit code
2 (input) or 1 (environment), never with a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import redis
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gateway import config, logs
from gateway.errors import BackendUnavailable, HeroError, InvalidParams
from gateway.pipeline.model import DEFAULT_ACCURACY, NoEvents, PipelineParams
from gateway.pipeline.timeparse import TIME_HELP, parse_time
from gateway.supervisor import keys

DEFAULT_EVENTS_DIR = "events"
DEFAULT_REPORT_DIR = "pipeline-out"

log = logging.getLogger("gateway.pipeline.cli")
err = Console(stderr=True, soft_wrap=True)
out = Console()
if not out.is_terminal:
    out = Console(width=160)


# -- argument types ------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _positive(text: str) -> float:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _fraction(text: str) -> float:
    value = _non_negative(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    return names


# -- shared helpers ------------------------------------------------------------


def _guard(action: Callable[[], int]) -> int:
    """Run a command body; user and environment errors become one line on stderr."""
    try:
        return action()
    except InvalidParams as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        return 2
    except HeroError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except OSError as exc:  # a full disk, a read-only folder, ...
        where = f" ({exc.filename})" if exc.filename else ""
        err.print(f"[red]error:[/red] {exc.strerror or exc}{where}", highlight=False)
        return 1


def _redacted(url: str) -> str:
    """A Redis URL fit for messages: scheme, host, port, db; no credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _redis_client(url: str, *, socket_timeout: float | None = None) -> redis.Redis:
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=5,
            socket_timeout=socket_timeout,
        )
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BackendUnavailable(f"Redis is unavailable at {_redacted(url)}") from exc
    except (ValueError, redis.RedisError) as exc:
        raise InvalidParams(f"cannot use Redis URL {_redacted(url)}: {exc}") from exc
    return client


def _output_dir(path: Path) -> Path:
    if path.exists() and not path.is_dir():
        raise InvalidParams(f"--out {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidParams(f"cannot create --out {path}: {exc.strerror}") from None
    return path


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT/SIGTERM (when running on the main thread)."""
    stop = threading.Event()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


# -- archive -------------------------------------------------------------------


def run_archive(args: argparse.Namespace) -> int:
    return _guard(lambda: _archive(args))


def _archive(args: argparse.Namespace) -> int:
    from gateway.pipeline.archive import ArchiveOptions, Archiver, default_consumer

    cfg = config.resolve(args)
    try:
        options = ArchiveOptions(
            out=_output_dir(Path(args.out)),
            group=args.group,
            consumer=args.consumer or default_consumer(),
            batch=args.batch,
            flush_interval=args.flush_interval,
            claim_idle=args.claim_idle,
        )
    except ValueError as exc:
        raise InvalidParams(str(exc)) from None
    client = _redis_client(cfg.redis, socket_timeout=options.block_ms / 1000 + 30)
    try:
        with _stop_on_signals() as stop:
            stats = Archiver(client, options).run(
                once=args.once,
                max_seconds=args.max_seconds,
                stop=stop,
            )
    finally:
        client.close()
    err.print(
        f"archived {stats.events:,} events into {stats.files:,} files in {stats.seconds:.1f}s "
        f"({stats.rate:,.0f} events/s); recovered {stats.recovered:,}, lost {stats.lost:,}, "
        f"lag {stats.lag if stats.lag is not None else 'unknown'}",
        highlight=False,
    )
    return 0


# -- pipeline run --------------------------------------------------------------


def _is_local_path(location: str) -> bool:
    scheme = urlsplit(location).scheme
    return scheme in ("", "file") or len(scheme) == 1  # 1 letter: a Windows drive


def _check_events(location: str) -> str:
    """A readable events location, or a clear error (local folders only are checked)."""
    if not _is_local_path(location):
        return location
    path = Path(location.removeprefix("file://"))
    if not path.exists():
        raise InvalidParams(
            f"events folder not found: {path} "
            f"(archive some with `hero-gateway archive --out {path}`)"
        )
    if not path.is_dir():
        raise InvalidParams(f"--events {path} is not a folder")
    from gateway.pipeline.store import event_files

    if not event_files(path):
        raise NoEvents(f"no archived events (*.parquet) under {path}")
    return str(path.resolve())


def run_pipeline(args: argparse.Namespace) -> int:
    return _guard(lambda: _pipeline(args))


def _pipeline(args: argparse.Namespace) -> int:
    cfg = config.resolve(args)
    now = int(time.time() * 1000)
    params = PipelineParams(
        events=_check_events(args.events),
        out=_output_dir(Path(args.out)).resolve(),
        since_ms=parse_time(args.since, now) if args.since else None,
        slo_wait=args.slo_wait,
        slo_quantile=args.slo_quantile,
        bucket_seconds=args.bucket,
        stuck_after=args.stuck_after,
        as_of_ms=parse_time(args.as_of, now) if args.as_of else None,
        accuracy=args.accuracy,
    )
    redis_url = cfg.redis_url
    if redis_url:  # fail before the Spark job rather than after it
        _redis_client(redis_url).close()

    from gateway.pipeline import analytics, charts, report, summary
    from gateway.pipeline.spark import SparkOptions, session

    try:
        py4j_error: type[Exception] = importlib.import_module("py4j.protocol").Py4JError
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - the pipeline extra is installed with the tests
        raise HeroError("pyspark is not installed (pip install 'hero-gateway[pipeline]')") from None

    quiet = args.quiet
    with err.status(f"starting Spark ({args.master})", spinner="dots") as status:
        owned = SparkSession.getActiveSession() is None
        spark = session(
            SparkOptions(
                master=args.master,
                shuffle_partitions=args.shuffle_partitions,
                driver_memory=args.driver_memory,
            )
        )

        def progress(stage: str) -> None:
            if not quiet:
                status.update(stage)

        try:
            result = analytics.run(spark, params, progress)
        except (PySparkException, py4j_error) as exc:
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:400]
            raise HeroError(f"the Spark job failed: {text}") from exc
        finally:
            if owned:
                spark.stop()
        status.update("writing report")
        built = report.build(result)
        path = report.write(built, params.out)
        charts.write(built, params.out)
        if redis_url:
            report.publish(built, redis_url)
    if not quiet:
        out.print(summary.render(built, path, published=bool(redis_url)), highlight=False)
    return 0


# -- pipeline synth ------------------------------------------------------------


def run_synth(args: argparse.Namespace) -> int:
    return _guard(lambda: _synth(args))


def _synth(args: argparse.Namespace) -> int:
    from gateway.pipeline import synth

    now = int(time.time() * 1000)
    span_ms = round(args.jobs / args.rate * 1000)
    start = parse_time(args.start, now) if args.start else now - span_ms
    try:
        spec = synth.SynthSpec(
            jobs=args.jobs,
            rate=args.rate,
            service_mean=args.service_mean,
            actors=args.actors,
            distribution=args.distribution,
            script_types=args.script_types,
            group=args.group,
            error_rate=args.error_rate,
            max_attempts=args.max_attempts,
            seed=args.seed,
            start_ms=start,
        )
    except ValueError as exc:
        raise InvalidParams(str(exc)) from None
    if spec.offered_load >= spec.actors:
        err.print(
            f"[yellow]warning:[/yellow] offered load {spec.offered_load:.3g} >= {spec.actors} "
            "actors: the queue is unstable and waits grow for the whole run",
            highlight=False,
        )
    client = None
    if args.to_redis:
        client = _redis_client(config.resolve(args).redis)
    else:
        _output_dir(Path(args.out))
    with err.status("simulating the queue", spinner="dots"):
        events, totals = synth.simulate(spec)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("XADD" if client else "writing Parquet", total=len(events))
        if client is not None:
            try:
                synth.xadd(spec, events, client, progress=lambda n: bar.advance(task, n))
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                raise BackendUnavailable("Redis went away while adding events") from exc
            finally:
                client.close()
            where = "the events stream"
        else:
            files = synth.write_parquet(
                spec,
                events,
                Path(args.out),
                rows_per_file=args.rows_per_file,
                progress=lambda n: bar.advance(task, n),
            )
            where = f"{len(files):,} file{'' if len(files) == 1 else 's'} under {args.out}"
    out.print(
        f"{totals.events:,} events for {totals.jobs:,} jobs into {where}: "
        f"{totals.attempts:,} attempts, {totals.finished:,} finished, {totals.errors:,} errors, "
        f"{totals.retries:,} retries, {totals.dlq:,} dlq; offered load "
        f"{spec.offered_load:.3g} on {spec.actors} actors per type",
        highlight=False,
    )
    return 0


# -- registration --------------------------------------------------------------


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``archive`` and ``pipeline {run,synth}`` on the gateway's CLI."""
    archive = subparsers.add_parser(
        "archive",
        help="archive the events stream into Parquet files",
        description=f"Read the events stream ({keys.EVENTS}) through a consumer group and "
        "write Parquet files partitioned date=YYYY-MM-DD/hour=HH; entries are acknowledged "
        "only once their file is durable. A restart resumes with its pending entries.",
    )
    archive.add_argument(
        "--out",
        default=DEFAULT_EVENTS_DIR,
        metavar="DIR",
        help="archive folder (default: %(default)s)",
    )
    archive.add_argument(
        "--group", default="archive", help="consumer group name (default: %(default)s)"
    )
    archive.add_argument(
        "--consumer",
        default=None,
        metavar="NAME",
        help="consumer name (default: the host name; keep it stable so a "
        "restart finds its pending entries)",
    )
    archive.add_argument(
        "--batch",
        type=_positive_int,
        default=10_000,
        metavar="N",
        help="most events per flush (default: %(default)s)",
    )
    archive.add_argument(
        "--flush-interval",
        type=_non_negative,
        default=10.0,
        metavar="S",
        help="flush a partial batch after this many seconds (default: %(default)s)",
    )
    archive.add_argument(
        "--claim-idle",
        type=_non_negative,
        default=300.0,
        metavar="S",
        help="take over other consumers' entries pending this long, "
        "0 for never (default: %(default)s)",
    )
    archive.add_argument(
        "--once", action="store_true", help="archive what the stream holds now, then exit"
    )
    archive.add_argument(
        "--max-seconds",
        type=_positive,
        default=None,
        metavar="S",
        help="stop after this many seconds",
    )
    config.add_arguments(archive, "archive")
    archive.set_defaults(func=run_archive)

    pipeline = subparsers.add_parser(
        "pipeline",
        help="job analytics on Spark (run) and synthetic events (synth)",
        description="Analyse archived job events with PySpark, or generate synthetic ones.",
    )
    commands = pipeline.add_subparsers(dest="pipeline_command", metavar="COMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="analyse the archive; write Parquet tables, report.json and charts.html",
        description="Per-job records, arrivals/completions/errors/timeouts/retries/DLQ, queue "
        "wait and run time percentiles, actor utilisation, stuck jobs and Erlang C actor "
        "counts, per script type and group, per time bucket and overall.",
    )
    run.add_argument(
        "--events",
        default=DEFAULT_EVENTS_DIR,
        metavar="DIR",
        help="archive folder (or any Spark-readable URL) (default: %(default)s)",
    )
    run.add_argument(
        "--out",
        default=DEFAULT_REPORT_DIR,
        metavar="DIR",
        help="where the tables and report.json go (default: %(default)s)",
    )
    run.add_argument(
        "--master",
        default="local[*]",
        metavar="URL",
        help="Spark master: local[*] (the default), local[N], spark://host:7077, yarn, k8s://…",
    )
    run.add_argument(
        "--since", default=None, metavar="TIME", help=f"only events from this time: {TIME_HELP}"
    )
    run.add_argument(
        "--slo-wait",
        type=_non_negative,
        default=60.0,
        metavar="SECONDS",
        help="queue wait target for the actor advice (default: %(default)s)",
    )
    run.add_argument(
        "--slo-quantile",
        type=_fraction,
        default=0.95,
        metavar="Q",
        help="share of jobs that must meet --slo-wait (default: %(default)s)",
    )
    run.add_argument(
        "--bucket",
        type=_positive_int,
        default=3600,
        metavar="SECONDS",
        help="time bucket length (default: %(default)s)",
    )
    run.add_argument(
        "--stuck-after",
        type=_non_negative,
        default=3600.0,
        metavar="SECONDS",
        help="a started job with no end for this long is stuck (default: %(default)s)",
    )
    run.add_argument(
        "--as-of",
        default=None,
        metavar="TIME",
        help="'now' for stuck jobs (default: the current time)",
    )
    run.add_argument(
        "--accuracy",
        type=_positive_int,
        default=DEFAULT_ACCURACY,
        metavar="N",
        help="percentile_approx accuracy (rank error <= 1/N) (default: %(default)s)",
    )
    run.add_argument(
        "--shuffle-partitions",
        type=_positive_int,
        default=None,
        metavar="N",
        help="spark.sql.shuffle.partitions (default 8 on local masters)",
    )
    run.add_argument(
        "--driver-memory", default=None, metavar="SIZE", help="spark.driver.memory, e.g. 4g"
    )
    run.add_argument(
        "--redis-url",
        dest="redis_url",
        default=None,
        metavar="URL",
        help="also store the report in Redis for stats.report [env HERO_REDIS_URL]",
    )
    run.add_argument("--quiet", action="store_true", help="no progress and no summary")
    run.set_defaults(func=run_pipeline)

    syn = commands.add_parser(
        "synth",
        help="simulate an M/M/c queue and write its events",
        description="Simulate FCFS queues (Poisson arrivals, exponential or constant service, "
        "c actors per script type) event by event, and write the job events in the archive "
        "layout or XADD them to the events stream.",
    )
    syn.add_argument(
        "--out",
        default=DEFAULT_EVENTS_DIR,
        metavar="DIR",
        help="archive folder to write (default: %(default)s; give each run into one "
        "folder its own --start)",
    )
    syn.add_argument(
        "--jobs",
        type=_non_negative_int,
        default=10_000,
        metavar="N",
        help="jobs per script type (default: %(default)s)",
    )
    syn.add_argument(
        "--rate",
        type=_positive,
        default=1.0,
        metavar="LAMBDA",
        help="arrivals per second per script type (Poisson) (default: %(default)s)",
    )
    syn.add_argument(
        "--service-mean",
        type=_positive,
        default=1.0,
        metavar="S",
        help="mean service time in seconds (default: %(default)s)",
    )
    syn.add_argument(
        "--distribution",
        choices=("exp", "const"),
        default="exp",
        help="service time distribution (default: %(default)s)",
    )
    syn.add_argument(
        "--actors",
        type=_positive_int,
        default=2,
        metavar="C",
        help="actors per script type (default: %(default)s)",
    )
    syn.add_argument(
        "--script-types",
        type=_names,
        default=("python",),
        metavar="A,B",
        help="script types, each its own queue and actors (default: python)",
    )
    syn.add_argument("--group", default="", help="group of every job")
    syn.add_argument(
        "--error-rate",
        type=_non_negative,
        default=0.0,
        metavar="P",
        help="probability an attempt fails (default: %(default)s)",
    )
    syn.add_argument(
        "--max-attempts",
        type=_positive_int,
        default=1,
        metavar="N",
        help="attempts before the DLQ (default: %(default)s)",
    )
    syn.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    syn.add_argument(
        "--start",
        default=None,
        metavar="TIME",
        help=f"simulated start time (default: now minus jobs/rate): {TIME_HELP}",
    )
    syn.add_argument(
        "--rows-per-file",
        type=_positive_int,
        default=200_000,
        metavar="N",
        help="most events per Parquet file (default: %(default)s)",
    )
    syn.add_argument(
        "--to-redis", action="store_true", help="XADD to the events stream instead of writing files"
    )
    syn.add_argument(
        "--redis-url",
        dest="redis_url",
        default=None,
        metavar="URL",
        help="Redis for --to-redis [env HERO_REDIS_URL]",
    )
    syn.set_defaults(func=run_synth)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m gateway.pipeline``)."""
    parser = argparse.ArgumentParser(prog="python -m gateway.pipeline")
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    cfg = config.resolve(args)
    logs.setup(cfg.log_level, cfg.log_format)
    result: int = args.func(args)
    return result
