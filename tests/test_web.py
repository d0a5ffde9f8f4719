"""The console at ``/``, served by a real gateway and used in a real browser.

Headless Chromium is Debian's package (``make system-deps`` installs it when
missing) driven by Playwright for Python; Playwright's own browser downloads
are never used. The browser tests run against a real gateway, redis-server
and python actor: a job submitted and stopped, the job detail view, the
filters, the live chart against ``queue.stats``, a DLQ replay and a purge with
an admin key, a user key that sees only its own jobs, a failed job's stdout
and stderr, a running job's log lines arriving live, and an SDK job's progress
bar moving while it runs. One leaves a screenshot in test-artifacts/.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.actor import Actor, JobContext
from gateway.codegen import js_client
from gateway.config import Config
from gateway.pipeline.charts import plotly_js
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.auth import KeyStore
from gateway.web import CLIENT_URL, FILES, PLOTLY_URL
from tests.conftest import ROOT
from tests.helpers import eventually, job
from tests.server_support import Server, fetch

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"


# -- what is served ------------------------------------------------------------------------


async def test_page_files_are_served(server: Server) -> None:
    status, headers, body = await fetch(server.http + "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'src="/web/app.js"' in body
    for url, (name, media_type) in FILES.items():
        status, headers, body = await fetch(server.http + url)
        assert status == 200, url
        assert headers["content-type"] == media_type
        assert headers["cache-control"] == "no-cache"
        assert body == (ROOT / "gateway" / "web" / name).read_bytes()


async def test_the_chart_library_is_served_from_the_package(server: Server) -> None:
    """plotly.min.js from the plotly package: gzipped, revalidated by ETag, no CDN."""
    page = (ROOT / "gateway" / "web" / "index.html").read_text()
    assert f'<script src="{PLOTLY_URL}"></script>' in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)

    url = server.http + PLOTLY_URL
    status, headers, body = await fetch(url, {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == plotly_js().read_bytes()
    assert len(body) < len(plotly_js().read_bytes()) / 2
    status, _, body = await fetch(url, {"If-None-Match": headers["etag"]})
    assert status == 304 and body == b""
    status, headers, body = await fetch(url)
    assert status == 200 and "content-encoding" not in headers
    assert body == plotly_js().read_bytes()


async def test_page_serves_the_generated_client_and_nothing_else(server: Server) -> None:
    """The page's client is the committed one, rendered by the gateway from its contract
    (no copy of it ships in gateway/web)."""
    status, headers, served = await fetch(server.http + CLIENT_URL)
    assert status == 200
    assert headers["content-type"] == "text/javascript; charset=utf-8"
    assert headers["cache-control"] == "no-cache"
    assert served == (ROOT / "clients" / "js" / "hero-client.js").read_bytes()
    assert not (ROOT / "gateway" / "web" / js_client.MODULE).exists()
    for private in ("/web/__init__.py", "/web/", "/client/", "/__init__.py"):
        status, _, _ = await fetch(server.http + private)
        assert status in (404, 405), private


# -- in a browser ----------------------------------------------------------------------------


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} missing: `make system-deps` installs Debian's chromium")
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


async def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    """A page at ``url`` and the list its JS errors go into."""
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" else None,
    )
    await page.goto(url)
    return page, errors


async def test_browser_runs_a_job_and_stops_a_long_one(
    server: Server, python_actor: Actor, browser: Any
) -> None:
    page, errors = await open_page(browser, server.http + "/")
    await page.wait_for_selector("#conn[data-state=open]", timeout=10_000)

    # live actors and queue depths are drawn from actor.list and queue.stats
    await page.wait_for_selector("#actors tbody tr", timeout=10_000)
    assert "python" in await page.inner_text("#actors")

    # submit a python job: its row goes to finished and its output shows
    await page.fill("#script", "print('hello from the browser', 6 * 7)")
    await page.select_option("#priority", "0")
    await page.click("#run")
    await page.wait_for_selector("#jobs tbody tr[data-status=finished]", timeout=20_000)
    await page.wait_for_function(
        "document.getElementById('detail-output').textContent"
        ".includes('hello from the browser 42')",
        timeout=10_000,
    )
    events = await page.inner_text("#events")
    for step in ("created", "dispatched", "started", "finished"):
        assert step in events
    await page.wait_for_selector("#queues tbody tr[data-queue]", timeout=10_000)

    # a long job: it starts, the stop button stops it
    await page.fill("#script", "import time\nprint('working', flush=True)\ntime.sleep(60)")
    await page.select_option("#priority", "1")
    await page.click("#run")
    running = "#jobs tbody tr[data-status=started]"
    await page.wait_for_selector(f"{running} button.stop", timeout=20_000)
    long_job = await page.get_attribute(running, "data-job-id")
    await page.click(f"{running} button.stop")
    await page.wait_for_selector(
        f'#jobs tbody tr[data-job-id="{long_job}"][data-status=stopped]', timeout=20_000
    )
    await page.wait_for_selector(
        f'#jobs tbody tr[data-job-id="{long_job}"] button.stop', state="detached"
    )
    await page.wait_for_function(
        "document.getElementById('detail-status').textContent.includes('stopped')",
        timeout=10_000,
    )

    await asyncio.sleep(0.5)  # let the next queue/actor poll land for the picture
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-page.png"
    await page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert errors == [], errors


async def enter_key(page: Any, key: str) -> None:
    """Type ``key`` into the console's key field and submit it."""
    await page.fill("#key", key)
    await page.click("#auth button[type=submit]")


async def test_browser_asks_for_a_key_and_uses_it(
    server: Server, sup: Supervisor, browser: Any
) -> None:
    key = await KeyStore(sup.wire, sup.config.redis).create("browser", "admin")
    page, errors = await open_page(browser, server.http + "/")
    await page.wait_for_function(
        "document.getElementById('notice').textContent.includes('needs an API key')",
        timeout=10_000,
    )
    await enter_key(page, key)
    await page.wait_for_function(
        "document.getElementById('who').textContent.includes('browser (admin)')",
        timeout=10_000,
    )
    assert await page.is_hidden("#notice")
    # the key lives in sessionStorage, so a reload stays logged in
    await page.reload()
    await page.wait_for_function(
        "document.getElementById('who').textContent.includes('browser (admin)')",
        timeout=10_000,
    )
    assert await page.evaluate("sessionStorage.getItem('hero-gateway-key')") == key
    assert errors == [], errors
    if os.environ.get("HERO_WEB_SHOTS"):
        await page.screenshot(path=str(ARTIFACTS / "web-page-auth.png"), full_page=True)


async def test_a_refused_key_is_told_apart_from_a_missing_one(
    server: Server, sup: Supervisor, browser: Any
) -> None:
    """A wrong key, or one revoked while the page is open, used to read "this
    gateway needs an API key", as if none had been entered."""
    store = KeyStore(sup.wire, sup.config.redis)
    key = await store.create("soon-revoked", "admin")
    await store.create("stays", "admin")  # with no key left a loopback gateway is open
    page, errors = await open_page(browser, server.http + "/")
    refused = (
        "document.getElementById('notice').textContent === "
        "'The gateway refused this key (Unknown or revoked API key): enter another one above.'"
    )
    await enter_key(page, "hgk_" + "x" * 43)
    await page.wait_for_function(refused, timeout=10_000)
    await enter_key(page, key)
    await page.wait_for_function(
        "document.getElementById('who').textContent.includes('soon-revoked (admin)')",
        timeout=10_000,
    )
    assert await store.revoke("soon-revoked")
    await page.wait_for_function(refused, timeout=15_000)
    assert errors == [], errors


# -- the console: detail, filters, live chart, DLQ, a user's own jobs -----------------------


@pytest.fixture
def config(config: Config) -> Config:
    """Fast retries, so a failing job reaches the dead-letter queue in a moment."""
    return dataclasses.replace(config, retry_base=0.05, retry_max=0.1)


async def rows(page: Any) -> list[str]:
    """The job ids the jobs table shows."""
    ids: list[str] = await page.eval_on_selector_all(
        "#jobs tbody tr", "rows => rows.map(r => r.dataset.jobId)"
    )
    return ids


async def wait_rows(page: Any, expected: set[str]) -> None:
    await page.wait_for_function(
        "ids => { const shown = [...document.querySelectorAll('#jobs tbody tr')]"
        ".map(r => r.dataset.jobId).sort(); return JSON.stringify(shown) === JSON.stringify(ids) }",
        arg=sorted(expected),
        timeout=10_000,
    )


def depth_per_type(queues: list[dict[str, Any]]) -> dict[str, int]:
    """What the live chart plots for one queue.stats answer."""
    out: dict[str, int] = {}
    for q in queues:
        out[q["script_type"]] = out.get(q["script_type"], 0) + q["depth"]
    return out


async def latest(page: Any) -> dict[str, Any]:
    raw = await page.get_attribute("#live-chart", "data-latest")
    return json.loads(raw) if raw else {}


async def test_console_detail_filters_and_live_chart(
    server: Server, sup: Supervisor, python_actor: Actor, browser: Any
) -> None:
    ok = await sup.run(job("print('fine')"), wait=30)
    failed = await sup.run(
        job(
            "import sys\nprint('before failing')\nprint('on stderr', file=sys.stderr)\n"
            "raise SystemExit('boom')",
            env_vars={"SECRET_TOKEN": "hunter2"},
        ),
        wait=30,
    )
    alices = await sup.run(job("print('mine')", caller_id="alice"), wait=30)
    assert (ok["status"], failed["status"], alices["status"]) == ("finished", "error", "finished")
    everyone = {ok["job_id"], failed["job_id"], alices["job_id"]}

    page, errors = await open_page(browser, server.http + "/")
    await page.wait_for_selector("#conn[data-state=open]", timeout=10_000)
    await wait_rows(page, everyone)
    # the Events panel is filled from the stream on load, not empty
    assert await page.locator(f'#events li[data-job-id="{failed["job_id"]}"]').count() >= 4

    # the detail view of the failed job: script, env var names only, output, error, timeline
    await page.click(f'#jobs tbody tr[data-job-id="{failed["job_id"]}"]')
    await page.wait_for_selector("#detail-section[data-status=error]", timeout=10_000)
    await page.wait_for_selector("#detail-timeline li[data-event=error]", timeout=10_000)
    assert await page.inner_text("#detail-id") == failed["job_id"]
    assert "raise SystemExit('boom')" in await page.inner_text("#detail-script")
    assert await page.inner_text("#detail-env") == "SECRET_TOKEN"
    assert "hunter2" not in await page.inner_text("body")
    # a failed job's stdout is its output, its stderr its error; the log has both
    assert failed["output"] == "before failing\n"
    assert await page.text_content("#detail-output") == failed["output"]
    assert await page.text_content("#detail-error") == "on stderr\nboom"
    await page.wait_for_function(
        "['before failing', 'on stderr', 'boom'].every(line => "
        "document.getElementById('detail-log').textContent.split('\\n').includes(line))",
        timeout=10_000,
    )
    timeline = await page.eval_on_selector_all(
        "#detail-timeline li", "items => items.map(i => i.dataset.event)"
    )
    assert timeline == ["created", "dispatched", "started", "error"]

    # filters: status, type, caller (the server filters the list, the page the live rows)
    await page.select_option("#f-status", "error")
    await wait_rows(page, {failed["job_id"]})
    await page.click("#f-clear")
    await wait_rows(page, everyone)
    await page.fill("#f-type", "osis")
    await page.click("#filters button[type=submit]")
    await wait_rows(page, set())
    await page.fill("#f-type", "python")
    await page.fill("#f-caller", "alice")
    await page.click("#filters button[type=submit]")
    await wait_rows(page, {alices["job_id"]})
    await page.click("#f-clear")

    # the live chart: depth goes 0 -> 3 while three long jobs wait or run, and its
    # newest point is what queue.stats says at that moment
    before = await latest(page)
    assert before["depth"].get("python", 0) == 0
    long_jobs = [
        (await sup.start((await sup.create(job("import time; time.sleep(60)")))["job_id"]))[
            "job_id"
        ]
        for _ in range(3)
    ]
    await page.wait_for_function(
        "() => { const l = document.getElementById('live-chart').dataset.latest;"
        " return l && JSON.parse(l).depth.python === 3 }",
        timeout=15_000,
    )
    now = depth_per_type(await sup.queue_stats())
    shown = await latest(page)
    assert shown["depth"] == now and shown["points"] > before["points"]
    plotted = await page.evaluate(
        "() => Object.fromEntries(document.getElementById('live-chart').data"
        ".filter(t => t.name.endsWith(' depth')).map(t => [t.name.split(' ')[0], t.y]))"
    )
    assert plotted["python"][-1] == 3 and 0 in plotted["python"]
    # stopping them: depth falls back to 0 and the ended jobs show as throughput
    stopped_at = (await latest(page))["points"]
    for job_id in long_jobs:
        await sup.stop(job_id)
    await page.wait_for_function(
        "() => { const l = JSON.parse(document.getElementById('live-chart').dataset.latest);"
        " return l.depth.python === 0 }",
        timeout=15_000,
    )
    ended = await page.evaluate(
        "() => document.getElementById('live-chart').data.find(t => t.name === 'ended /s').y"
    )
    assert max(ended[stopped_at:]) > 0
    assert errors == [], errors


#: Prints a line every 0.7 s, six times (the executor runs python unbuffered).
TICKER = """
import time
for i in range(6):
    print(f"line {i}")
    time.sleep(0.7)
"""


async def open_detail(page: Any, job_id: str) -> None:
    """Click the job's row (job.list or the live stream put it there)."""
    row = f'#jobs tbody tr[data-job-id="{job_id}"]'
    await page.wait_for_selector(row, timeout=10_000)
    await page.click(row)
    await page.wait_for_function(
        "id => document.getElementById('detail-id').textContent === id", arg=job_id
    )


async def test_detail_view_shows_a_running_jobs_log_live(
    server: Server, sup: Supervisor, python_actor: Actor, browser: Any
) -> None:
    """Opened while the job runs, after it printed: job.logs gives the lines so
    far, the subscription's replay repeats them (shown once), and the lines
    printed afterwards arrive as ``log`` events while the job is ``started``."""
    page, errors = await open_page(browser, server.http + "/")
    await page.wait_for_selector("#conn[data-state=open]", timeout=10_000)
    job_id = (await sup.create(job(TICKER)))["job_id"]
    await sup.start(job_id)

    async def printed_first_line() -> bool:
        return "line 0" in (await sup.logs(job_id))["logs"]

    await eventually(printed_first_line)
    await open_detail(page, job_id)
    loaded = await page.wait_for_function(
        "document.getElementById('detail-log').textContent", timeout=10_000
    )
    # the next line is one job.logs did not have yet
    wanted = f"line {len((await loaded.json_value()).splitlines())}"
    assert wanted != "line 6", "the job printed everything before the page looked"
    seen = await page.wait_for_function(
        "wanted => { const log = document.getElementById('detail-log').textContent;"
        " return log.includes(wanted) && { log,"
        " status: document.getElementById('detail-section').dataset.status } }",
        arg=wanted,
        timeout=10_000,
    )
    seen_while = await seen.json_value()
    assert seen_while["status"] == "started"
    assert (await sup.status(job_id))["status"] == "started"
    expected = "".join(f"line {i}\n" for i in range(6))
    # every line once, in order: the replay of what job.logs had is not shown twice
    assert expected.startswith(seen_while["log"]), seen_while["log"]

    await page.wait_for_selector("#detail-section[data-status=finished]", timeout=15_000)
    assert (await sup.logs(job_id))["logs"] == expected
    await page.wait_for_function(
        "text => document.getElementById('detail-log').textContent === text",
        arg=expected,
        timeout=10_000,
    )
    assert await page.text_content("#detail-output") == expected  # job.output, stdout
    assert errors == [], errors


async def test_detail_view_progress_bar_moves_while_an_sdk_job_runs(
    server: Server, sup: Supervisor, actors: Any, config: Config, browser: Any
) -> None:
    """An SDK handler reports progress, then waits for the test to let it go on,
    so each step is seen in the page while the job runs."""
    steps = [asyncio.Event() for _ in range(3)]
    actor = Actor(config, instance="sdk")

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        for i, go_on in enumerate(steps, 1):
            ctx.progress(i / 4, f"step {i} of 4")
            await go_on.wait()
        return "all steps done"

    actors(actor)
    page, errors = await open_page(browser, server.http + "/")
    await page.wait_for_selector("#conn[data-state=open]", timeout=10_000)
    job_id = (await sup.create(job("x", script_type="osis")))["job_id"]
    await sup.start(job_id)
    try:
        await open_detail(page, job_id)
        for i, go_on in enumerate(steps, 1):
            await page.wait_for_function(
                "([value, message]) => { const bar = document.getElementById('detail-progress');"
                " return !bar.hidden && bar.value === value && document.getElementById("
                "'detail-progress-message').textContent === message }",
                arg=[i / 4, f"step {i} of 4"],
                timeout=10_000,
            )
            assert await page.get_attribute("#detail-section", "data-status") == "started"
            assert (await sup.status(job_id))["status"] == "started"
            go_on.set()
    finally:
        for go_on in steps:  # a failed wait must not leave the handler hanging
            go_on.set()
    await page.wait_for_function(
        "document.getElementById('detail-output').textContent === 'all steps done'",
        timeout=10_000,
    )
    assert await page.get_attribute("#detail-section", "data-status") == "finished"
    assert await page.evaluate("document.getElementById('detail-progress').value") == 1
    assert await page.inner_text("#detail-progress-message") == ""
    assert errors == [], errors


async def test_console_admin_replays_the_dlq_and_a_user_sees_only_its_jobs(
    server: Server, sup: Supervisor, python_actor: Actor, browser: Any, rds: Any
) -> None:
    store = KeyStore(sup.wire, sup.config.redis)
    admin_key = await store.create("ops", "admin")
    alice_key = await store.create("alice", "user", "alice")
    dead = await sup.run(job("raise SystemExit('always')", retries=1), wait=30)
    assert dead["status"] == "dlq"
    bobs = await sup.run(job("print('bob')", caller_id="bob"), wait=30)
    alices = await sup.run(job("print('alice')", caller_id="alice"), wait=30)

    # an admin: the DLQ lists the job; Replay dispatches it again
    page, errors = await open_page(browser, server.http + "/")
    await page.evaluate("key => sessionStorage.setItem('hero-gateway-key', key)", admin_key)
    await page.reload()
    await page.wait_for_function(
        "document.getElementById('who').textContent.includes('ops (admin)')", timeout=10_000
    )
    entry = f'#dlq tbody tr[data-job-id="{dead["job_id"]}"]'
    await page.wait_for_selector(entry, timeout=10_000)
    await wait_rows(page, {dead["job_id"], bobs["job_id"], alices["job_id"]})
    await page.click(f"{entry} button.replay")
    await page.wait_for_function(
        "id => document.getElementById('admin-result').textContent === `replayed 1: ${id}`",
        arg=dead["job_id"],
        timeout=10_000,
    )
    events = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == dead["job_id"]]
    assert "dispatched" in events[events.index("dlq") :]
    # Purge, after the confirm dialog: the finished jobs are gone
    page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.select_option("#purge-status", "finished")
    await page.fill("#purge-older", "0")
    await page.click("#purge button[type=submit]")
    await page.wait_for_function(
        "document.getElementById('admin-result').textContent.startsWith('purged')",
        timeout=10_000,
    )
    assert await page.inner_text("#admin-result") == "purged 2 finished job(s)"
    assert (await sup.list_jobs(status="finished"))["jobs"] == []

    # a user key: only its own jobs, no admin panel, the caller filter pinned to itself
    await sup.run(job("print('bob')", caller_id="bob"), wait=30)
    purged_alices = alices["job_id"]
    alices = await sup.run(job("print('alice')", caller_id="alice"), wait=30)
    await enter_key(page, alice_key)
    await page.wait_for_function(
        "document.getElementById('who').textContent.includes('alice (user)')", timeout=10_000
    )
    await wait_rows(page, {alices["job_id"]})
    assert await page.is_hidden("#admin-section")
    assert await page.is_disabled("#f-caller")
    assert await page.input_value("#f-caller") == "alice"
    await page.wait_for_selector("#events li", timeout=10_000)
    shown = await page.eval_on_selector_all("#events li", "li => li.map(i => i.dataset.jobId)")
    assert set(shown) == {alices["job_id"], purged_alices}  # her events, purged job or not
    assert errors == [], errors
