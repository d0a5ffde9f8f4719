"""``hero-gateway archive`` and ``hero-gateway pipeline run|synth``.

``add_commands(subparsers)`` registers the commands on the gateway's CLI; each
parser sets ``func(args) -> int`` (their bodies are in ``commands/``). Every
option is a setting (gateway/config/pipeline.py): a flag here, a ``HERO_*``
variable, a row of the README's table. Bad input (a missing folder, no
events, a malformed time, Redis down) is reported in one line on stderr with
exit code 2 (input) or 1 (environment), never with a traceback.
"""

from __future__ import annotations

import argparse

from gateway import config, logs
from gateway.pipeline.commands.archive import run_archive
from gateway.pipeline.commands.run import run_pipeline
from gateway.pipeline.commands.synth import run_synth
from gateway.supervisor import keys


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``archive`` and ``pipeline {run,synth}`` on the gateway's CLI."""
    archive = subparsers.add_parser(
        "archive",
        help="archive the events stream into Parquet files",
        description=f"Read the events stream ({keys.EVENTS}) through a consumer group and "
        "write Parquet files partitioned date=YYYY-MM-DD/hour=HH; entries are acknowledged "
        "only once their file is durable. A restart resumes with its pending entries.",
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
        "counts, per script type and group, per time bucket and overall. With a Redis URL "
        "the report is also stored there for stats.report.",
    )
    config.add_arguments(run, "pipeline run")
    run.set_defaults(func=run_pipeline)
    syn = commands.add_parser(
        "synth",
        help="simulate an M/M/c queue and write its events",
        description="Simulate FCFS queues (Poisson arrivals, exponential or constant service, "
        "c actors per script type) event by event, and write the job events in the archive "
        "layout or XADD them to the events stream.",
    )
    config.add_arguments(syn, "pipeline synth")
    syn.set_defaults(func=run_synth)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m gateway.pipeline``)."""
    parser = argparse.ArgumentParser(prog="python -m gateway.pipeline")
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    cfg = config.resolve(args, dev_redis=False)
    logs.setup(cfg.log_level, cfg.log_format)
    result: int = args.func(args)
    return result
