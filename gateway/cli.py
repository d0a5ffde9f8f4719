"""The ``hero-gateway`` command.

    hero-gateway dev                       redis (embedded unless --redis-url) + gateway + actor
    hero-gateway serve                     the JSON-RPC gateway
    hero-gateway actor --script-type T     a worker for one script type
    hero-gateway keys create|list|revoke   API keys
    hero-gateway acl [--apply]             Redis ACL users for actors, gateways, admins, producers
    hero-gateway archive / pipeline ...    events archive and Spark analytics

Every flag also reads a ``HERO_*`` environment variable (see gateway/config/).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence

from redis.exceptions import RedisError

from gateway import __version__, logs
from gateway.config import (
    DEFAULT_REDIS_URL,
    add_arguments,
    argument_type,
    markdown_table,
    positive_int,
    redacted,
    resolve,
)
from gateway.errors import BackendUnavailable
from gateway.supervisor.keys import IDENT_PATTERN

Command = Callable[[argparse.Namespace], int]


def _ident(text: str) -> str:
    if not re.fullmatch(IDENT_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: use letters, digits, '_', '.', '-' (at most 128 characters)"
        )
    return text


def _load_handler(spec: str) -> Callable[..., object]:
    """Import ``module:function`` with the current folder first on the path, as
    ``uvicorn app:app`` does: the ``hero-gateway`` script's own path starts at
    its bin folder, so ``mymodule.py`` beside the user would not be found."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"--handler {spec!r}: expected module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"--handler {spec!r}: {exc}") from None
    if not callable(fn):
        raise SystemExit(f"--handler {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def cmd_actor(args: argparse.Namespace) -> int:
    from gateway.actor import Actor, python_actor
    from gateway.actor.sandbox import SandboxUnavailable

    config = resolve(args)
    where = {"group": args.group, "instance": args.instance, "concurrency": args.concurrency}
    if args.handler:
        actor = Actor(config, **where)
        actor.handler(args.script_type)(_load_handler(args.handler))  # type: ignore[arg-type]
    elif args.script_type == "python":
        try:
            actor = python_actor(config, **where)
        except SandboxUnavailable as exc:
            print(f"hero-gateway actor: {exc}", file=sys.stderr)
            return 2
    else:
        print(
            f"no built-in executor for script type {args.script_type!r}: pass "
            "--handler module:function, or write an actor with gateway.actor.Actor",
            file=sys.stderr,
        )
        return 2
    actor.run()
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table())
        return 0
    for name, value in redacted(resolve(args)).items():
        print(f"{name:24} {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hero-gateway", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"hero-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("actor", help="run a worker for one script type")
    p.add_argument("--script-type", required=True, type=_ident, help="script type to serve")
    p.add_argument("--group", type=_ident, help="group this instance belongs to")
    p.add_argument("--instance", type=_ident, help="instance name (default host-pid)")
    p.add_argument(
        "--concurrency",
        type=argument_type(positive_int),
        default=1,
        help="jobs run at once (default 1)",
    )
    p.add_argument("--handler", help="module:function to run jobs with (SDK handler)")
    add_arguments(p, "actor")
    p.set_defaults(func=cmd_actor)

    p = sub.add_parser("config", help="show the effective settings (flags > HERO_* env > defaults)")
    p.add_argument("--markdown", action="store_true", help="print the README's settings table")
    add_arguments(p, "serve")
    p.set_defaults(func=cmd_config)

    from gateway.dev import add_command as add_dev

    add_dev(sub)
    for module in ("gateway.server", "gateway.acl_command", "gateway.codegen.cli",
                   "gateway.pipeline.cli"):  # fmt: skip
        try:
            importlib.import_module(module).add_commands(sub)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise  # a missing dependency, not a missing optional command module
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. What the operator's environment did to it (a Redis that
    refuses or is gone, a folder that cannot be made, a reader of the output
    that went away) ends it with one line, not a traceback: said here, once,
    so every command says it alike."""
    args = build_parser().parse_args(argv)
    config = resolve(args, dev_redis=False)  # only the log settings; the command resolves Redis
    logs.setup(config.log_level, config.log_format)
    func: Command = args.func
    try:
        code = func(args)
        sys.stdout.flush()  # a reader gone before the last of it is said below, not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader has all it wanted
        # nothing more can be written, not even the interpreter's last flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (RedisError, BackendUnavailable) as exc:
        url = resolve(args).redis if hasattr(args, "redis_url") else DEFAULT_REDIS_URL
        print(f"{_command(args)}: {logs.redis_failure(exc, url)}", file=sys.stderr)
        return 1
    except OSError as exc:  # a folder that cannot be made, a full disk, ...
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{_command(args)}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1


def _command(args: argparse.Namespace) -> str:
    """The command's full name for its messages, as ``hero-gateway keys list``."""
    words = (args.command, getattr(args, "action", None), getattr(args, "pipeline_command", None))
    return " ".join(["hero-gateway", *(w for w in words if w)])


if __name__ == "__main__":
    sys.exit(main())
