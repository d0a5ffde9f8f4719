"""``hero-gateway pipeline run``: the Spark analytics of the archive, its report and charts."""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gateway import config
from gateway.errors import HeroError, InvalidParams
from gateway.pipeline.commands.common import err, folder, guard, out, output_dir, redis_client
from gateway.pipeline.model import NoEvents, PipelineParams
from gateway.pipeline.timeparse import parse_time

if TYPE_CHECKING:
    from rich.status import Status

    from gateway.pipeline.model import PipelineResult


def run_pipeline(args: argparse.Namespace) -> int:
    return guard(lambda: _pipeline(config.resolve(args)))


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


def _params(cfg: config.Config) -> PipelineParams:
    """The analysis the settings ask for, checked before Spark starts."""
    now = int(time.time() * 1000)
    return PipelineParams(
        events=_check_events(folder(cfg.pipeline_events, "events")),
        out=output_dir(Path(folder(cfg.pipeline_out, "pipeline-out"))).resolve(),
        since_ms=parse_time(cfg.pipeline_since, now) if cfg.pipeline_since else None,
        slo_wait=cfg.pipeline_slo_wait,
        slo_quantile=cfg.pipeline_slo_quantile,
        bucket_seconds=cfg.pipeline_bucket,
        stuck_after=cfg.pipeline_stuck_after,
        as_of_ms=parse_time(cfg.pipeline_as_of, now) if cfg.pipeline_as_of else None,
        accuracy=cfg.pipeline_accuracy,
    )


def _pipeline(cfg: config.Config) -> int:
    params = _params(cfg)
    redis_url = cfg.redis_url
    if redis_url:  # fail before the Spark job rather than after it
        redis_client(redis_url).close()

    from gateway.pipeline import charts, report, summary

    with err.status(f"starting Spark ({cfg.pipeline_master})", spinner="dots") as status:
        result = _analyse(cfg, params, status)
        status.update("writing report")
        built = report.build(result)
        path = report.write(built, params.out)
        charts.write(built, params.out)
        if redis_url:
            report.publish(built, redis_url)
    if not cfg.pipeline_quiet:
        out.print(summary.render(built, path, published=bool(redis_url)), highlight=False)
    return 0


def _analyse(cfg: config.Config, params: PipelineParams, status: Status) -> PipelineResult:
    """Run the Spark job (in a session of our own unless one is active)."""
    from gateway.pipeline import analytics
    from gateway.pipeline.spark import SparkOptions, session

    try:
        py4j_error: type[Exception] = importlib.import_module("py4j.protocol").Py4JError
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - the pipeline extra is installed with the tests
        raise HeroError("pyspark is not installed (pip install 'hero-gateway[pipeline]')") from None

    owned = SparkSession.getActiveSession() is None
    spark: Any = session(
        SparkOptions(
            master=cfg.pipeline_master,
            shuffle_partitions=cfg.pipeline_shuffle_partitions,
            driver_memory=cfg.pipeline_driver_memory,
        )
    )

    def progress(stage: str) -> None:
        if not cfg.pipeline_quiet:
            status.update(stage)

    try:
        return analytics.run(spark, params, progress)
    except (PySparkException, py4j_error) as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:400]
        raise HeroError(f"the Spark job failed: {text}") from exc
    finally:
        if owned:
            spark.stop()
