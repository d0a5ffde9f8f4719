"""Start and stop a private redis-server.

Used by ``hero-gateway dev`` (the embedded default when no Redis URL is
given) and by the test session, which must never touch a shared 6379.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def bind_error(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on now (None: it can), checked the way
    servers bind (SO_REUSEADDR), so a port in TIME_WAIT is not reported taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc
    return None


def dies_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGTERM the child when its parent dies
    (Linux's PR_SET_PDEATHSIG), so a ``dev`` that is killed outright leaves no
    children behind. Only safe while the parent runs no other thread: ``dev``
    starts all its children before its first thread."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return set_pdeathsig


@dataclass
class EmbeddedRedis:
    """A redis-server child process bound to loopback, with AOF on by default.

    Ready means *this* redis-server answers: a PONG from another server on
    the same port (ours failed to bind) is not mistaken for it. The child runs
    in its own session, so a Ctrl-C in the terminal reaches only its parent,
    which stops it after the clients that use it.

    ``settings`` are further redis-server options (name, value) after ours,
    which they override; ``wrapper`` is a command the server runs under, its
    argv before redis-server's (valgrind, for bench/lua_cost.py), which must
    exec redis-server in its own process, as the readiness check asks the
    server for its pid.
    """

    data_dir: Path
    port: int = 0
    appendonly: bool = True
    process: subprocess.Popen[bytes] | None = None
    #: Stop with the parent process even when it is killed (``dev``; see dies_with_parent).
    tied_to_parent: bool = False
    settings: Mapping[str, str] = field(default_factory=dict)
    wrapper: Sequence[str] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found on PATH (make setup installs it)")
        if not self.port:
            self.port = free_port()
        elif (error := bind_error("127.0.0.1", self.port)) is not None:
            raise RuntimeError(f"cannot listen on 127.0.0.1:{self.port}: {error.strerror}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        extra = [arg for name, value in self.settings.items() for arg in (f"--{name}", value)]
        self.process = subprocess.Popen(
            [
                *self.wrapper,
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.data_dir),
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--save",
                "",
                "--protected-mode",
                "yes",
                "--logfile",
                str(self.data_dir / "redis.log"),
                "--maxclients",
                "20000",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=dies_with_parent() if self.tied_to_parent else None,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2)
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    log = self.data_dir / "redis.log"
                    tail = log.read_text()[-500:] if log.exists() else ""
                    raise RuntimeError(f"redis-server exited early: {tail}")
                try:
                    if self.process is not None and self._answers_as(client, self.process.pid):
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server not ready on port {self.port}")
                time.sleep(0.05)
        finally:
            client.close()

    @staticmethod
    def _answers_as(client: redis.Redis, pid: int) -> bool:
        """Whether the server on the port is ours and has loaded its data: INFO
        answers while the AOF is still loading, every other command LOADING."""
        info: dict[str, object] = client.info("server")
        if info.get("process_id") != pid:
            return False
        persistence: dict[str, object] = client.info("persistence")
        return persistence.get("loading") == 0

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
