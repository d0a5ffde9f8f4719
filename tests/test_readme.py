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
"""

from __future__ import annotations

import re
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
RUNNABLE = {"sh", "python"}
SHOWN_ONLY = {"yaml", "text"}  # configuration and layouts: read, not run
#: The blocks marked skip: the set-up/suite (2), Docker (4) and Kubernetes (1).
SKIPPED = 7


@dataclass(frozen=True)
class Example:
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
        """A python block that starts with ``# NAME.py`` is a file to save, not to run."""
        found = re.match(r"# (\w+\.py)\n", self.body) if self.lang == "python" else None
        return found.group(1) if found else None


def examples(path: Path = ROOT / "README.md") -> list[Example]:
    text = path.read_text()
    return [
        Example(text.count("\n", 0, m.start("lang")) + 1, m["lang"], m["body"], m["marker"])
        for m in FENCE.finditer(text)
    ]


def runnable() -> list[Example]:
    return [e for e in examples() if e.lang in RUNNABLE and not (e.marker or "").startswith("skip")]


def test_every_block_is_run_or_marked() -> None:
    found = examples()
    assert {e.lang for e in found} <= RUNNABLE | SHOWN_ONLY, [e.lang for e in found]
    skipped = [e for e in found if (e.marker or "").startswith("skip (")]
    assert len(skipped) == SKIPPED, [e.line for e in skipped]
    for e in found:
        assert e.marker is None or e in skipped or e.until, f"README.md:{e.line}: {e.marker}"
    for e in runnable():  # what cannot run here must say so in the README
        assert not re.search(r"\b(docker|kubectl|make)\b", e.body), f"README.md:{e.line}"
        assert not re.search(r"(?<!:-)\b8080\b", e.body), f"README.md:{e.line}: fixed port"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with running_dev(tmp_path_factory.mktemp("home")) as stack:
        yield stack


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's checkout as the examples see it: its .venv is the one running the tests."""
    folder = tmp_path_factory.mktemp("checkout")
    (folder / ".venv").symlink_to(sys.prefix)
    return folder


def _command(example: Example, folder: Path) -> list[str]:
    if example.lang == "sh":
        return ["bash", "-euo", "pipefail", "-c", example.body]
    script = folder / f"example_{example.line}.py"
    script.write_text(example.body)
    return [sys.executable, str(script)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", runnable(), ids=lambda e: f"README.md:{e.line}")
def test_readme_example(example: Example, stack: DevStack, checkout: Path) -> None:
    if example.saved_as:
        (checkout / example.saved_as).write_text(example.body)
        return
    env = user_env(Path(stack.env["HOME"]), HERO_PORT=str(stack.port))
    del env["HERO_LOG_LEVEL"]  # the default, as a user has it
    output = checkout / f"example_{example.line}.out"
    with output.open("wb") as sink:
        proc = subprocess.Popen(
            _command(example, checkout), cwd=checkout, env=env, stdout=sink, stderr=sink,
            start_new_session=True,
        )  # fmt: skip
        try:
            if example.until:
                deadline = time.monotonic() + 60
                while example.until not in output.read_text():
                    assert proc.poll() is None and time.monotonic() < deadline, output.read_text()
                    time.sleep(0.1)
                proc.send_signal(signal.SIGINT)  # Ctrl-C
            code = proc.wait(240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    said = output.read_text()
    assert code == 0, said
    assert not re.search(r'"error":\s*\{|"level":\s*"(error|critical)"', said), said
