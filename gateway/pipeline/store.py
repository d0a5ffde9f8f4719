"""The archive's on-disk layout, and writing files so they appear whole or not at all.

Layout (Hive-style, so Spark discovers ``date`` and ``hour`` partitions)::

    <root>/date=YYYY-MM-DD/hour=HH/part-<first-id>-<last-id>.parquet

``date``/``hour`` are the UTC time of each event's ``ts``; first/last are the
smallest and largest stream ids in the file. A file is written under a hidden
temporary name (Spark skips names starting with ``.``), fsynced, renamed into
place, and its folder fsynced: a reader sees either the whole file or nothing,
and after ``write_events`` returns the data survives a crash. An existing name
is never overwritten (a ``.N`` suffix is added): a re-archived range becomes
duplicates, which the pipeline drops by event id, never a loss.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gateway.pipeline.events import MS_PER_HOUR, SCHEMA, EventColumns

COMPRESSION = "snappy"


def partition_dir(hour: int) -> str:
    """``date=YYYY-MM-DD/hour=HH`` for an hour counted from the epoch (UTC)."""
    when = datetime.fromtimestamp(hour * MS_PER_HOUR / 1000, UTC)
    return f"date={when:%Y-%m-%d}/hour={when:%H}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """``mkdir -p`` that also makes each new folder durable (fsync of its parent)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        _fsync_dir(folder.parent)


def _free_name(directory: Path, name: str) -> Path:
    target = directory / name
    stem = name.removesuffix(".parquet")
    n = 0
    while target.exists():
        n += 1
        target = directory / f"{stem}.{n}.parquet"
    return target


def write_table(table: pa.Table, directory: Path, name: str) -> Path:
    """Write ``table`` as ``directory/name`` (or a free variant of it), durably and atomically."""
    ensure_dir(directory)
    final = _free_name(directory, name)
    tmp = directory / f".{final.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as sink:
            pq.write_table(table, sink, compression=COMPRESSION)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(directory)
    return final


def _chunks(rows: list[int], size: int | None) -> Iterator[list[int]]:
    if not size or len(rows) <= size:
        yield rows
        return
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def write_events(
    root: Path,
    batch: EventColumns,
    max_rows_per_file: int | None = None,
) -> list[Path]:
    """Write ``batch`` into the layout under ``root``: one file per hour (or per chunk)."""
    if not len(batch):
        return []
    hours = batch.hours
    by_hour: dict[int, list[int]] = {}
    if min(hours) == max(hours):  # the usual case: no per-row grouping
        by_hour[hours[0]] = list(range(len(hours)))
    else:
        for i, hour in enumerate(hours):
            by_hour.setdefault(hour, []).append(i)
    full = batch.table()
    written: list[Path] = []
    for hour, rows in sorted(by_hour.items()):
        for chunk in _chunks(rows, max_rows_per_file):
            whole = len(chunk) == len(full)
            table = full if whole else full.take(pa.array(chunk))
            first, last = batch.id_range(None if whole else chunk)
            name = f"part-{first.ms}-{first.seq}-{last.ms}-{last.seq}.parquet"
            written.append(write_table(table, root / partition_dir(hour), name))
    return written


def event_files(root: Path) -> list[Path]:
    """Every archived Parquet file under ``root`` (temporary files excluded), sorted."""
    return sorted(
        p
        for p in root.rglob("*.parquet")
        if not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    )


def read_events(root: Path) -> pa.Table:
    """All archived rows under ``root`` as one table (duplicates kept): for tests and tools."""
    files = event_files(root)
    if not files:
        return SCHEMA.empty_table()
    return pa.concat_tables(pq.read_table(f, schema=SCHEMA) for f in files)
