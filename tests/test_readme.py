"""The README's examples, run as written against a ``hero-gateway dev`` stack.

The blocks are read from README.md, not copied here. The test plays the user:
a checkout folder (its ``.venv`` is this test's venv), a second terminal with
no HERO_REDIS_URL, and only what the README itself says may vary supplied as
environment variables (HERO_PORT, and the state folder through
XDG_STATE_HOME). A block that cannot run here is marked in the README with
``<!-- example: skip (why) -->`` and counted below, so a new one that needs
Docker or a fixed port fails until it is marked; ``<!-- example: run until
"TEXT" -->`` marks a long-running one, which must print TEXT and then stop
cleanly on Ctrl-C.

The clients' READMEs are run the same way, with two differences: their
examples name the gateway's URL, so ``127.0.0.1:8080`` becomes the stack's
port; and the Python client is imported from clients/python (its install is
tests/test_client_python.py's). The JS client is installed as its README says,
``npm install ./clients/js``, with npm preferring its cache.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.dev_stack import DevStack, running_dev, user_env

FENCE = re.compile(
    r"(?:<!-- example: (?P<marker>[^\n]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```",
    re.S | re.M,
)
RUNNABLE = {"sh", "python", "js"}
SHOWN_ONLY = {"yaml", "text"}  # configuration and layouts: read, not run
#: The blocks marked skip in each README: in README.md the set-up/suite (2),
#: Docker (4) and Kubernetes (1); the Python client's install.
SKIPPED = {"README.md": 7, "clients/python/README.md": 1, "clients/js/README.md": 0}


@dataclass(frozen=True)
class Example:
    readme: str
    line: int
    lang: str
    body: str
    marker: str | None

    @property
    def until(self) -> str | None:
        found = re.fullmatch(r'run until "([^"]+)"', self.marker or "")
        return found.group(1) if found else None

    @property
    def saved_as(self) -> str | None:
        """A block that starts with ``# NAME.py`` (``// NAME.mjs``) is a file: saved, then
        run if it is JS (the Python ones are modules that other examples use)."""
        found = re.match(r"(?:# |// )([\w.]+\.(?:py|mjs))\n", self.body)
        return found.group(1) if found else None

    def __str__(self) -> str:
        return f"{self.readme}:{self.line}"


def examples(readme: str) -> list[Example]:
    text = (ROOT / readme).read_text()
    return [
        Example(readme, text.count("\n", 0, m.start("lang")) + 1, m["lang"], m["body"], m["marker"])
        for m in FENCE.finditer(text)
    ]


def runnable() -> list[Example]:
    return [
        e
        for readme in SKIPPED
        for e in examples(readme)
        if e.lang in RUNNABLE and not (e.marker or "").startswith("skip")
    ]


@pytest.mark.parametrize("readme", SKIPPED)
def test_every_block_is_run_or_marked(readme: str) -> None:
    found = examples(readme)
    assert {e.lang for e in found} <= RUNNABLE | SHOWN_ONLY, [e.lang for e in found]
    skipped = [e for e in found if (e.marker or "").startswith("skip (")]
    assert len(skipped) == SKIPPED[readme], [str(e) for e in skipped]
    for e in found:
        assert e.marker is None or e in skipped or e.until, f"{e}: {e.marker}"
    if readme != "README.md":
        return
    for e in runnable():  # what cannot run here must say so in the README
        if e.readme == readme:
            assert not re.search(r"\b(docker|kubectl|make)\b", e.body), str(e)
            assert not re.search(r"(?<!:-)\b8080\b", e.body), f"{e}: fixed port"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with running_dev(tmp_path_factory.mktemp("home")) as stack:
        yield stack


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's checkout as the examples see it: its .venv is the one running the
    tests, its clients/ the repository's."""
    folder = tmp_path_factory.mktemp("checkout")
    (folder / ".venv").symlink_to(sys.prefix)
    (folder / "clients").symlink_to(ROOT / "clients")
    return folder


def _command(example: Example, folder: Path, body: str) -> list[str]:
    if example.lang == "sh":
        return ["bash", "-euo", "pipefail", "-c", body]
    script = folder / (example.saved_as or f"example_{example.line}.py")
    script.write_text(body)
    if example.lang == "js":
        if shutil.which("node") is None:
            pytest.skip("node is not installed (make test-system-deps installs it)")
        return ["node", script.name]
    return [sys.executable, script.name]


@pytest.mark.timeout(600)  # `pipeline run` starts Spark: about a minute, more on a busy machine
@pytest.mark.parametrize("example", runnable(), ids=str)
def test_readme_example(example: Example, stack: DevStack, checkout: Path) -> None:
    body = example.body
    if example.readme != "README.md":
        body = body.replace("127.0.0.1:8080", f"127.0.0.1:{stack.port}")
    if example.lang == "python" and example.saved_as:
        (checkout / example.saved_as).write_text(body)
        return
    env = user_env(Path(stack.env["HOME"]), HERO_PORT=str(stack.port))
    del env["HERO_LOG_LEVEL"]  # the default, as a user has it
    env.update(PYTHONPATH=str(ROOT / "clients" / "python"), npm_config_prefer_offline="true")
    if example.lang == "sh" and "npm" in body and shutil.which("npm") is None:
        pytest.skip("npm is not installed (make test-system-deps installs it)")
    output = checkout / f"example_{example.line}.out"
    with output.open("wb") as sink:
        proc = subprocess.Popen(
            _command(example, checkout, body), cwd=checkout, env=env, stdout=sink, stderr=sink,
            start_new_session=True,
        )  # fmt: skip
        try:
            if example.until:
                deadline = time.monotonic() + 60
                while example.until not in output.read_text():
                    assert proc.poll() is None and time.monotonic() < deadline, output.read_text()
                    time.sleep(0.1)
                proc.send_signal(signal.SIGINT)  # Ctrl-C
            code = proc.wait(540)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    said = output.read_text()
    assert code == 0, said
    assert not re.search(r'"error":\s*\{|"level":\s*"(error|critical)"', said), said
