"""``Config``, the table of its settings, and how flags and variables become one.

Precedence: CLI flag, then ``HERO_*`` environment variable, then default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.config.pipeline import ArchiveSettings, RunSettings, SynthSettings
from gateway.config.process import JobSettings, ProcessSettings, ServeSettings
from gateway.config.queue import DEFAULT_REDIS_URL, QueueSettings, mask_password
from gateway.config.setting import Setting, settings_of
from gateway.paths import read_dev_record


@dataclass(frozen=True)
class Config(
    SynthSettings,
    RunSettings,
    ArchiveSettings,
    ProcessSettings,
    JobSettings,
    ServeSettings,
    QueueSettings,
):
    """Every setting, resolved. Its fields run in the order of the bases from
    the last (``QueueSettings``) to the first, which is the README's order."""


#: Every setting at its default: the defaults of the pipeline's own option types.
DEFAULTS = Config()

#: One row per field of ``Config``: the CLI flags, the variables and the README table.
SETTINGS: tuple[Setting, ...] = settings_of(Config)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the flags of every setting that applies to ``command``.

    A flag's default is None, so that ``resolve`` can tell "not given" from a
    value and fall back to the variable, then to the setting's default.
    """
    for s in SETTINGS:
        if command not in s.commands:
            continue
        if s.is_switch:
            parser.add_argument(
                s.flag,
                dest=s.name,
                action="store_const",
                const=True,
                default=None,
                help=f"{s.help} [env {s.env}]",
            )
        else:
            parser.add_argument(
                s.flag,
                dest=s.name,
                type=argument_type(s.parse),
                default=None,
                metavar=s.metavar or s.flag.lstrip("-").replace("-", "_").upper(),
                help=f"{s.help} [env {s.env}, default {s.show(s.default)}]",
            )


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` for argparse: its ValueError message becomes the usage error.
    Also for a command's own flags, so they refuse bad values as settings do."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def resolve(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    dev_redis: bool = True,
) -> Config:
    """Build a ``Config`` from flags, then ``HERO_*`` variables, then defaults.

    The Redis URL has one more step before its default: the Redis of a running
    ``hero-gateway dev`` (see ``_dev_redis_url``). It applies to the process's
    own environment (``environ`` None) and to commands that talk to Redis,
    which are the ones with a ``--redis-url`` flag; never to ``dev`` itself.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for s in SETTINGS:
        value = getattr(args, s.name, None) if args is not None else None
        if value is None and s.env in env:
            try:
                value = s.parse(env[s.env])
            except ValueError as exc:
                raise SystemExit(f"{s.env}: {exc}") from None
        if value is not None:
            values[s.name] = value
    uses_redis = args is None or (
        hasattr(args, "redis_url") and getattr(args, "command", None) != "dev"
    )
    if dev_redis and environ is None and uses_redis and values.get("redis_url") is None:
        values["redis_url"] = _dev_redis_url()
    config = Config(**values)
    for variable, named in (
        ("HERO_STREAM_TYPES", config.stream_types),
        ("HERO_LEGACY_QUEUES", [t for t, _ in config.legacy_queues]),
    ):
        unknown = sorted(set(named) - set(config.script_types))
        if unknown:
            raise SystemExit(
                f"{variable}: {', '.join(unknown)} not among the script types "
                f"({', '.join(config.script_types)})"
            )
    return config


_announced: set[str] = set()


def _dev_redis_url() -> str | None:
    """The URL ``hero-gateway dev`` recorded, said once per process on stderr.

    A record whose dev has exited stops the command: falling back to 6379
    would load the ``hero`` library into whatever Redis happens to be there.
    """
    record = read_dev_record()
    if record is None:
        return None
    if not record.alive:
        raise SystemExit(
            f"hero-gateway: the dev Redis recorded in {record.path} ({record.redis_url}) is "
            f"gone: `hero-gateway dev` (pid {record.pid}) is no longer running. Start it again "
            f"(make run), set HERO_REDIS_URL or --redis-url, or delete that file to use "
            f"{DEFAULT_REDIS_URL}."
        )
    if record.redis_url not in _announced:
        _announced.add(record.redis_url)
        print(
            f"hero-gateway: using the Redis of `hero-gateway dev`, {record.redis_url} "
            f"(HERO_REDIS_URL or --redis-url choose another)",
            file=sys.stderr,
        )
    return record.redis_url


def markdown_table() -> str:
    """The README's configuration table, generated from SETTINGS."""
    rows = [
        "| variable | flag | default | commands | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        rows.append(
            f"| `{s.env}` | `{s.flag}` | `{s.show(s.default)}` | {', '.join(s.commands)} "
            f"| {s.help} |"
        )
    return "\n".join(rows)


def redacted(config: Config) -> dict[str, Any]:
    """The effective settings with any password in the Redis URL hidden (in its
    user part or its query: ``mask_password``)."""
    values = {s.name: getattr(config, s.name) for s in SETTINGS}
    if config.redis_url:
        values["redis_url"] = mask_password(config.redis_url)
    return values
