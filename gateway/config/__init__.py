"""Every setting hero-gateway has, declared once.

Each setting is a field of ``Config`` declared with ``setting(...)`` (see
``setting.py``): its type, its default, its ``HERO_*`` variable, its CLI flag,
its help and the commands that take it live in that one declaration. The CLI
builds its flags from it, ``hero-gateway config --markdown`` prints the
README's table from it, and the rest of the code only ever sees a resolved
``Config``. The fields are grouped by who reads them: ``queue.py`` (Redis and
the queues), ``process.py`` (the gateway's transport, the actor's jobs, logs)
and ``pipeline.py`` (archive, pipeline run, pipeline synth).

Precedence: CLI flag, then environment variable, then default.
"""

from gateway.config.pipeline import TIME_HELP
from gateway.config.queue import (
    DEFAULT_REDIS_URL,
    DEFAULT_SCRIPT_TYPES,
    LEGACY_KINDS,
    URL_SECRETS,
    mask_password,
)
from gateway.config.resolve import (
    DEFAULTS,
    SETTINGS,
    Config,
    add_arguments,
    argument_type,
    markdown_table,
    redacted,
    resolve,
)
from gateway.config.setting import Setting, parse_port, positive_int

__all__ = [
    "DEFAULTS",
    "DEFAULT_REDIS_URL",
    "DEFAULT_SCRIPT_TYPES",
    "LEGACY_KINDS",
    "SETTINGS",
    "TIME_HELP",
    "URL_SECRETS",
    "Config",
    "Setting",
    "add_arguments",
    "argument_type",
    "markdown_table",
    "mask_password",
    "parse_port",
    "positive_int",
    "redacted",
    "resolve",
]
