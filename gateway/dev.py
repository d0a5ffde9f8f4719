"""``hero-gateway dev``: the whole stack on one machine with one command.

Without a Redis URL it starts its own redis-server (AOF on, data under the
user's state dir, loopback only), then the gateway and one python actor as
child processes. Ctrl-C (or SIGTERM) stops them in reverse order and waits
for each, so nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import Any

from gateway.config import SETTINGS, add_arguments, resolve
from gateway.embedded_redis import EmbeddedRedis
from gateway.paths import state_dir

DEV_REDIS_PORT = 6390


def _child(*argv: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "gateway.cli", *argv], env=env)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def child_environment(args: argparse.Namespace, redis_url: str) -> dict[str, str]:
    """The environment for the children: ``dev``'s own flags become HERO_* variables,
    so ``dev --port 9000`` really serves on 9000."""
    env = dict(os.environ, HERO_REDIS_URL=redis_url)
    for setting in SETTINGS:
        value = getattr(args, setting.name, None)
        if value is not None and setting.name != "redis_url":
            env[setting.env] = ",".join(value) if isinstance(value, tuple) else str(value)
    return env


def cmd_dev(args: argparse.Namespace) -> int:
    config = resolve(args)
    embedded: EmbeddedRedis | None = None
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        redis_url = config.redis_url
        if redis_url is None:
            embedded = EmbeddedRedis(state_dir() / "redis", port=args.redis_port).start()
            redis_url = embedded.url
            print(f"redis     {redis_url}  (embedded, data in {embedded.data_dir})", flush=True)
        env = child_environment(args, redis_url)
        if args.with_gateway:
            children.append(_child("serve", env=env))
            print(f"gateway   http://{config.host}:{config.port}/", flush=True)
            print(f"          ws://{config.host}:{config.port}/ws  (JSON-RPC)", flush=True)
            print(
                f"          http://{config.host}:{config.port}/rpc  (JSON-RPC over POST)",
                flush=True,
            )
        children.append(_child("actor", "--script-type", "python", env=env))
        print("actor     python (1 instance)", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        while not stopping:
            for proc in children:
                if proc.poll() is not None:
                    print(f"a child exited with code {proc.returncode}; stopping", file=sys.stderr)
                    stopping = True
            time.sleep(0.2)
    finally:
        for proc in reversed(children):
            _stop(proc)
        if embedded is not None:
            embedded.stop()
        print("stopped.", flush=True)
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("dev", help="run redis (embedded unless --redis-url), gateway and an actor")
    p.add_argument(
        "--redis-port",
        type=int,
        default=DEV_REDIS_PORT,
        help=f"port of the embedded redis-server (default {DEV_REDIS_PORT})",
    )
    p.add_argument(
        "--no-gateway",
        dest="with_gateway",
        action="store_false",
        help="start only redis and the actor",
    )
    add_arguments(p, "dev")
    p.set_defaults(func=cmd_dev)
