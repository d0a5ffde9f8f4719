"""``hero-gateway archive``: the events stream into Parquet files until stopped (or once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gateway import config
from gateway.errors import InvalidParams
from gateway.pipeline.commands.common import (
    err,
    folder,
    guard,
    output_dir,
    redis_client,
    stop_on_signals,
)


def run_archive(args: argparse.Namespace) -> int:
    return guard(lambda: _archive(config.resolve(args)))


def _archive(cfg: config.Config) -> int:
    from gateway.pipeline.archive import ArchiveOptions, Archiver, default_consumer

    try:
        options = ArchiveOptions(
            out=output_dir(Path(folder(cfg.archive_out, "events"))),
            group=cfg.archive_group,
            consumer=cfg.archive_consumer or default_consumer(),
            batch=cfg.archive_batch,
            flush_interval=cfg.archive_flush_interval,
            claim_idle=cfg.archive_claim_idle,
        )
    except ValueError as exc:
        raise InvalidParams(str(exc)) from None
    client = redis_client(cfg.redis, socket_timeout=options.block_ms / 1000 + 30)
    try:
        with stop_on_signals() as stop:
            stats = Archiver(client, options).run(
                once=cfg.archive_once,
                max_seconds=cfg.archive_max_seconds,
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
