"""``hero-gateway dev``: the whole stack on one machine with one command.

Without a Redis URL it starts its own redis-server (AOF on, loopback only,
data under the user's state dir in one folder per port, so two dev stacks
never share an AOF), then the gateway and one python actor as child
processes. It runs only against a redis-server it started: a taken port is
an error, never a reason to use whatever Redis answers there.

It records the Redis URL in the state dir (gateway/paths.py), so commands in
a second terminal find it without flags. Ctrl-C (or SIGTERM) stops the
children in reverse order, then Redis, and waits for each. The children run
in their own process groups, so the terminal's Ctrl-C reaches only ``dev``
and Redis is never gone before the clients that use it; the kernel stops them
if ``dev`` itself is killed. A child that fails
makes ``dev`` exit 1 naming it, its error and the setting that fixes it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gateway.config import SETTINGS, Config, add_arguments, argument_type, parse_port, resolve
from gateway.embedded_redis import EmbeddedRedis, bind_error, dies_with_parent
from gateway.paths import clear_dev_record, state_dir, write_dev_record

DEV_REDIS_PORT = 6390
REDIS_HINT = "choose another port with --redis-port, or use a Redis of yours with --redis-url"
GATEWAY_HINT = "choose another port with --port or HERO_PORT (the address: --host or HERO_HOST)"
ACTOR_HINT = "its log is above"


class ChildFailed(Exception):
    """A part of the stack could not start or stopped on its own."""

    def __init__(self, child: str, error: str, hint: str) -> None:
        super().__init__(f"{child}: {error}; {hint}")


@dataclass
class Child:
    """A child process whose stderr is passed through and its last lines kept."""

    name: str
    hint: str
    proc: subprocess.Popen[bytes]
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))

    def forward(self) -> None:
        """Pass its stderr through, in a thread (started once every child is)."""
        assert self.proc.stderr is not None
        threading.Thread(target=self._forward, args=(self.proc.stderr,), daemon=True).start()

    def _forward(self, stream: IO[bytes]) -> None:
        for raw in stream:
            sys.stderr.buffer.write(raw)
            sys.stderr.flush()
            self.tail.append(raw.decode(errors="replace").strip())

    def error(self) -> str:
        """The child's last error line (the message of a JSON log line), else its last line."""
        lines = [line for line in self.tail if line]
        for line in reversed(lines):
            try:
                entry = json.loads(line)
            except ValueError:
                return line
            if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
                return str(entry.get("msg", line))
        return lines[-1] if lines else "no output"


def _child(name: str, hint: str, *argv: str, env: dict[str, str]) -> Child:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", *argv],
        env=env,
        stderr=subprocess.PIPE,
        process_group=0,
        preexec_fn=dies_with_parent(),
    )
    return Child(name, hint, proc)


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
            env[setting.env] = setting.show(value)
    return env


def _second_terminal() -> str:
    """How another terminal reaches this ``hero-gateway`` (its venv, when it runs in one)."""
    bindir = Path(sys.executable).parent
    try:
        shown = bindir.relative_to(Path.cwd())
    except ValueError:
        shown = bindir
    if sys.prefix != sys.base_prefix:
        return f". {shown}/activate   (or run {shown}/hero-gateway)"
    return f"{shown}/hero-gateway"


def _start_redis(port: int) -> EmbeddedRedis:
    try:
        return EmbeddedRedis(state_dir() / f"redis-{port}", port=port, tied_to_parent=True).start()
    except RuntimeError as exc:
        raise ChildFailed("redis-server", str(exc), REDIS_HINT) from None


def cmd_dev(args: argparse.Namespace) -> int:
    config = resolve(args)
    embedded: EmbeddedRedis | None = None
    children: list[Child] = []
    stopping = False

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGHUP: terminal closed
        signal.signal(signum, on_signal)
    try:
        if args.with_gateway and (error := bind_error(config.host, config.port)) is not None:
            raise ChildFailed(
                "gateway", f"cannot listen on {config.host}:{config.port}: {error.strerror}",
                GATEWAY_HINT,
            )  # fmt: skip
        redis_url = config.redis_url
        if redis_url is None:
            embedded = _start_redis(args.redis_port)
            redis_url = embedded.url
            print(f"redis     {redis_url}  (embedded, data in {embedded.data_dir})", flush=True)
        record = write_dev_record(redis_url)
        _start_children(children, args, config, child_environment(args, redis_url))
        print("actor     python (1 instance)", flush=True)
        print(f"another terminal: {_second_terminal()}", flush=True)
        print(f"          its commands use this Redis without flags ({record})", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        while not stopping:
            _check_alive(children, embedded)
            time.sleep(0.2)
    except ChildFailed as exc:
        print(f"dev: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        for child in reversed(children):
            _stop(child.proc)
        if embedded is not None:
            embedded.stop()
        clear_dev_record()
        print("stopped.", flush=True)
    return 0


def _start_children(
    children: list[Child], args: argparse.Namespace, config: Config, env: dict[str, str]
) -> None:
    """Start the gateway (unless --no-gateway) and one python actor, forwarding their
    output; each is in ``children`` as soon as it runs, so a failure stops it too."""
    if args.with_gateway:
        children.append(_child("gateway", GATEWAY_HINT, "serve", env=env))
        print(f"gateway   http://{config.host}:{config.port}/", flush=True)
        print(f"          ws://{config.host}:{config.port}/ws  (JSON-RPC)", flush=True)
        print(f"          http://{config.host}:{config.port}/rpc  (JSON-RPC over POST)", flush=True)
    children.append(_child("actor", ACTOR_HINT, "actor", "--script-type", "python", env=env))
    for child in children:  # only now: no thread may run while children are forked
        child.forward()


def _check_alive(children: list[Child], embedded: EmbeddedRedis | None) -> None:
    """ChildFailed, with its hint, when a child or the embedded redis-server exited."""
    for child in children:
        if (code := child.proc.poll()) is not None:
            raise ChildFailed(
                f"the {child.name}", f"exited with code {code}: {child.error()}", child.hint
            )
    if embedded is not None and embedded.process and embedded.process.poll() is not None:
        raise ChildFailed(
            "redis-server", f"exited; see {embedded.data_dir / 'redis.log'}", REDIS_HINT
        )


def add_command(sub: Any) -> None:
    p = sub.add_parser("dev", help="run redis (embedded unless --redis-url), gateway and an actor")
    p.add_argument(
        "--redis-port",
        type=argument_type(parse_port),
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
