"""Make the README's pictures: the console at work and a pipeline report.

    .venv/bin/python scripts/screenshots.py            # writes docs/console.png, docs/report.png

Everything is real and local: a redis-server of its own on a free loopback
port, ``hero-gateway serve`` and a python actor as child processes, a few jobs
(finished, failed, dead-lettered, some still running so the live chart has
depth), ``pipeline synth`` + ``pipeline run`` on local Spark for the report
(published, so the console shows its charts too), and Debian's Chromium driven
by Playwright for the screenshots. Every process it starts is stopped by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.embedded_redis import EmbeddedRedis, free_port

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
WIDTH = 1280
CONSOLE_HEIGHT = 1640


def hero(*argv: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Rpc:
    """JSON-RPC over HTTP POST /rpc (no client needed for a handful of calls)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = 0

    def __call__(self, method: str, **params: Any) -> Any:
        self.ids += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        request = urllib.request.Request(
            self.url, body.encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]


def wait_up(rpc: Rpc, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if rpc("actor.list")["actors"]:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the gateway or the actor did not come up")
        time.sleep(0.2)


@contextmanager
def stack(work: Path) -> Iterator[tuple[str, str]]:
    """redis-server, gateway and a python actor: yields (redis URL, gateway URL)."""
    redis = EmbeddedRedis(work / "redis", port=free_port()).start()
    port = free_port()
    env = dict(
        os.environ,
        HERO_REDIS_URL=redis.url,
        HERO_PORT=str(port),
        HERO_LOG_DIR=str(work / "logs"),
        HERO_RETRY_BASE="0.05",
        HERO_RETRY_MAX="0.1",
    )
    children = [hero("serve", env=env), hero("actor", "--script-type", "python", env=env)]
    try:
        yield redis.url, f"http://127.0.0.1:{port}"
    finally:
        for proc in reversed(children):
            stop(proc)
        redis.stop()


def workload(rpc: Rpc) -> str:
    """Jobs worth looking at; returns the failed one's id (shown in the detail view)."""
    for n in range(4):
        rpc("job.run", job={"script": f"print('report part {n} done')", "script_type": "python"})
    rpc(
        "job.run",
        job={"script": "print('hello')", "script_type": "python", "caller_id": "alice"},
    )
    rpc("job.run", job={"script": "raise SystemExit('dead')", "script_type": "python",
                        "retries": 1}, wait=30)  # fmt: skip
    failed = rpc(
        "job.run",
        job={
            "script": "import sys\nprint('loading 3 files', flush=True)\n"
            "sys.exit('input.csv: no such file')",
            "script_type": "python",
            "env_vars": {"API_TOKEN": "not shown", "REGION": "eu-west"},
        },
        wait=30,
    )
    return str(failed["job_id"])


def long_jobs(rpc: Rpc, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        created = rpc("job.create", job={"script": "import time; time.sleep(40)",
                                         "script_type": "python"})  # fmt: skip
        ids.append(rpc("job.start", job_id=created["job_id"])["job_id"])
    return ids


def pipeline(work: Path, redis_url: str) -> Path:
    """Synthetic traffic for two types, analysed and published; returns the out folder."""
    events, out = work / "events", work / "pipeline-out"
    common = [sys.executable, "-m", "gateway.cli", "pipeline"]
    subprocess.run(
        [*common, "synth", "--out", str(events), "--jobs", "1500", "--rate", "2",
         "--service-mean", "0.9", "--actors", "3", "--script-types", "python,osis",
         "--error-rate", "0.05", "--max-attempts", "2"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    subprocess.run(
        [*common, "run", "--events", str(events), "--out", str(out), "--bucket", "60",
         "--slo-wait", "1", "--redis-url", redis_url, "--master", "local[2]", "--quiet"],
        check=True,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
    )  # fmt: skip
    return out


async def shoot(rpc: Rpc, failed: str, report_dir: Path, dest: Path) -> list[str]:
    """Both pictures; returns the ids of the long jobs it started (to stop)."""
    from playwright.async_api import async_playwright

    gateway = rpc.url.removesuffix("/rpc")
    running: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": WIDTH, "height": 900})
            await page.goto(gateway + "/")
            await page.wait_for_selector("#conn[data-state=open]")
            await page.wait_for_selector("#report-charts .chart .main-svg", timeout=30_000)
            await page.click(f'#jobs tbody tr[data-job-id="{failed}"]')
            await page.wait_for_selector("#detail-timeline li[data-event=error]")
            # long jobs arrive while the page looks: the live chart's depth rises
            await asyncio.sleep(6)
            running = await asyncio.to_thread(long_jobs, rpc, 3)
            await page.wait_for_function(
                "() => { const l = document.getElementById('live-chart').dataset.latest;"
                " return l && JSON.parse(l).points >= 14 }",
                timeout=60_000,
            )
            await page.mouse.move(0, 0)  # no row lit up by a hover
            # the top of the console (the report's charts are the other picture)
            await page.screenshot(path=str(dest / "console.png"), full_page=True, clip={
                "x": 0, "y": 0, "width": WIDTH, "height": CONSOLE_HEIGHT})  # fmt: skip

            report = await browser.new_page(viewport={"width": WIDTH, "height": 900})
            await report.goto((report_dir / "charts.html").as_uri())
            await report.wait_for_selector("#chart-actors .main-svg")
            await report.screenshot(path=str(dest / "report.png"), full_page=True)
        finally:
            await browser.close()
    return running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hero-shots-") as tmp:
        work = Path(tmp)
        with stack(work) as (redis_url, gateway):
            rpc = Rpc(gateway + "/rpc")
            wait_up(rpc)
            report_dir = pipeline(work, redis_url)
            failed = workload(rpc)
            for job_id in asyncio.run(shoot(rpc, failed, report_dir, args.out)):
                rpc("job.stop", job_id=job_id)
    for name in ("console.png", "report.png"):
        print(f"{args.out / name}: {(args.out / name).stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
