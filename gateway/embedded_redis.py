"""Start and stop a private redis-server.

Used by ``hero-gateway dev`` (the embedded default when no Redis URL is
given) and by the test session, which must never touch a shared 6379.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class EmbeddedRedis:
    """A redis-server child process bound to loopback, with AOF on by default."""

    data_dir: Path
    port: int = 0
    appendonly: bool = True
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found on PATH (make setup installs it)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        self.process = subprocess.Popen(
            [
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
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
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
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server not ready on port {self.port}")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
