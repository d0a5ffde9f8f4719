"""The page at ``/``, served by a real gateway and used in a real browser.

Headless Chromium is Debian's package (``make system-deps`` installs it when
missing) driven by Playwright for Python; Playwright's own browser downloads
are never used. The browser test runs against a real gateway, redis-server
and python actor: it submits a job and sees its output, stops a long job, and
leaves a screenshot in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import asyncio
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.actor import Actor
from gateway.codegen import js_client
from gateway.supervisor import Supervisor
from gateway.supervisor.auth import KeyStore
from gateway.web import CLIENT_URL, FILES, JS_MEDIA_TYPE
from tests.test_client_harness import ROOT, RunningGateway, gateway, python_actor

__all__ = ["gateway", "python_actor"]  # fixtures, imported for pytest

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


async def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    def get() -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    return await asyncio.to_thread(get)


# -- what is served ------------------------------------------------------------------------


async def test_page_files_are_served(gateway: RunningGateway) -> None:
    status, headers, body = await fetch(gateway.http_url + "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'src="/web/app.js"' in body
    for url, (name, media_type) in FILES.items():
        status, headers, body = await fetch(gateway.http_url + url)
        assert status == 200, url
        assert headers["content-type"] == media_type
        assert headers["cache-control"] == "no-cache"
        assert body == (ROOT / "gateway" / "web" / name).read_bytes()


async def test_page_serves_the_generated_client_and_nothing_else(gateway: RunningGateway) -> None:
    """The page's client is the committed one, rendered by the gateway from its contract
    (no copy of it ships in gateway/web)."""
    status, headers, served = await fetch(gateway.http_url + CLIENT_URL)
    assert status == 200
    assert headers["content-type"] == JS_MEDIA_TYPE
    assert headers["cache-control"] == "no-cache"
    assert served == (ROOT / "clients" / "js" / "hero-client.js").read_bytes()
    assert not (ROOT / "gateway" / "web" / js_client.MODULE).exists()
    for private in ("/web/__init__.py", "/web/", "/client/", "/__init__.py"):
        status, _, _ = await fetch(gateway.http_url + private)
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
    gateway: RunningGateway, python_actor: Actor, browser: Any
) -> None:
    page, errors = await open_page(browser, gateway.http_url + "/")
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
        "document.getElementById('output').textContent.includes('hello from the browser 42')",
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
        "document.getElementById('output-status').textContent.includes('stopped')",
        timeout=10_000,
    )

    await asyncio.sleep(0.5)  # let the next queue/actor poll land for the picture
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-page.png"
    await page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert errors == [], errors


async def test_browser_asks_for_a_key_and_uses_it(
    gateway: RunningGateway, sup: Supervisor, browser: Any
) -> None:
    key = await KeyStore(sup.redis).create("browser", "admin")
    page, errors = await open_page(browser, gateway.http_url + "/")
    await page.wait_for_function(
        "document.getElementById('notice').textContent.includes('needs an API key')",
        timeout=10_000,
    )
    await page.fill("#key", key)
    await page.click("#auth button[type=submit]")
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
