"""The generated Python client against a real gateway, redis-server and python actor.

What a user of ``clients/python`` relies on: it installs with pip, runs a job
in three lines, subscribes, raises the server's codes as exceptions, honours
per-call timeouts, authenticates by key, and keeps a subscription across a
gateway restart without losing or repeating events.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.actor import Actor
from gateway.supervisor import Supervisor
from gateway.supervisor.auth import KeyStore
from tests.conftest import ROOT
from tests.helpers import eventually, started
from tests.server_support import Server

sys.path.insert(0, str(ROOT / "clients" / "python"))

from hero_client import (
    CallTimeout,
    HeroClient,
    HeroClientError,
    InvalidParams,
    InvalidState,
    JobNotFound,
    RpcError,
    Unauthenticated,
    WaitTimeout,
)

LIFECYCLE = ["created", "dispatched", "started", "finished"]


async def events_of(
    stream: Any, job_id: str, until: str = "finished", within: float = 20
) -> list[Any]:
    """Every event read from a stream, up to and including ``until`` of one job."""
    seen: list[Any] = []
    async with asyncio.timeout(within):
        async for event in stream:
            seen.append(event)
            if event["job_id"] == job_id and event["event"] == until:
                return seen
    raise AssertionError(f"the stream ended before {until} of {job_id}: {seen}")


# -- install ---------------------------------------------------------------------------------


async def test_pip_install_and_run_a_job_in_three_lines(
    server: Server, python_actor: Actor, tmp_path: Path
) -> None:
    """``pip install ./clients/python`` into a fresh venv, then the README's three
    lines. --no-deps: websockets, the one dependency, is reused from this environment.
    The wheel is built offline with this environment's setuptools and wheel."""
    source = tmp_path / "src"
    shutil.copytree(ROOT / "clients" / "python", source)  # builds write into the tree
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Build the wheel here (this environment has setuptools and wheel, so no
    # download), then pip-install that wheel into the fresh venv.
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-q",
         "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)],
        check=True, timeout=240,
    )  # fmt: skip
    [wheel] = dist.glob("hero_client-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
         "install", "-q", "--no-deps", str(wheel)],
        check=True, timeout=240,
    )  # fmt: skip
    # websockets (the one dependency) comes from this environment, nothing else does
    import websockets

    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (site / "reuse-websockets.pth").write_text(str(Path(websockets.__file__).parent.parent) + "\n")

    three_lines = (
        "import hero_client\n"
        f"result = hero_client.run('print(6 * 7)', url='{server.ws}')\n"
        "print(result['status'], result['output'].strip(), hero_client.__file__)\n"
    )
    proc = await asyncio.create_subprocess_exec(
        str(python),
        "-c",
        three_lines,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    status, output, location = out.decode().split()
    assert (status, output) == ("finished", "42")
    assert Path(location).is_relative_to(venv), "imported from the repo, not the install"


# -- calls -----------------------------------------------------------------------------------


async def test_run_results_and_failed_jobs(server: Server, python_actor: Actor) -> None:
    async with HeroClient(server.ws) as hero:
        ok = await hero.run("print('hello')", wait=30)
        assert ok["status"] == "finished"
        assert ok["output"] == "hello\n"
        failed = await hero.run("raise SystemExit('boom')", wait=30)
        assert failed["status"] == "error"  # a failed job is a result, not an exception
        job = await hero.job_get(ok["job_id"])
        assert job["id"] == ok["job_id"] and job["status"] == "finished"
        page = await hero.job_list(limit=10)
        assert {ok["job_id"], failed["job_id"]} <= {j["id"] for j in page["jobs"]}
        queues = await hero.queue_stats(script_type="python")
        assert all(q["script_type"] == "python" for q in queues["queues"])
        actors = await hero.actor_list()
        assert [a["script_type"] for a in actors["actors"]] == ["python"]
        assert await hero.stats_report() is None
        assert (await hero.rpc_discover())["openrpc"].startswith("1.")


async def test_create_start_output_stop_delete(server: Server, python_actor: Actor) -> None:
    async with HeroClient(server.ws) as hero:
        created = await hero.job_create(
            {"script": "import time; time.sleep(30)", "script_type": "python"}
        )
        assert created["status"] == "created"
        job_id = created["job_id"]
        started = await hero.job_start(job_id)
        assert started["queue"]
        with pytest.raises(InvalidState) as again:
            await hero.job_start(job_id)
        assert again.value.code == -32002
        with pytest.raises(WaitTimeout) as waited:
            await hero.job_output(job_id, wait=0.3)
        assert waited.value.data == {"job_id": job_id}
        assert (await hero.job_stop(job_id))["status"] == "stopped"
        assert (await hero.job_output(job_id, wait=10))["status"] == "stopped"
        assert (await hero.job_delete(job_id))["deleted"] is True
        with pytest.raises(JobNotFound) as missing:
            await hero.job_status(job_id)
        assert missing.value.code == -32001
        assert isinstance(missing.value, RpcError) and isinstance(missing.value, HeroClientError)


async def test_invalid_params_carry_the_schema_path(server: Server) -> None:
    async with HeroClient(server.ws) as hero:
        with pytest.raises(InvalidParams) as bad:
            await hero.job_create({"script": "x", "script_type": "python", "priority": 7})
        assert bad.value.code == -32602
        assert "priority" in str(bad.value.data)


async def test_per_call_timeout(server: Server, python_actor: Actor) -> None:
    async with HeroClient(server.ws, timeout=30) as hero:
        job_id = "slow-call"
        job = {"script": "import time; time.sleep(30)", "script_type": "python", "job_id": job_id}
        with pytest.raises(CallTimeout):
            await hero.job_run(job, timeout=0.3)  # type: ignore[arg-type]
        assert isinstance(CallTimeout("x"), TimeoutError)
        await hero.job_stop(job_id)  # the job itself runs on: not the client's business
        # the connection is still fine after a call timed out
        assert (await hero.auth_whoami())["scope"] == "anonymous"


async def test_deprecated_hero_names_warn_and_work(server: Server, python_actor: Actor) -> None:
    async with HeroClient(server.ws) as hero:
        with pytest.warns(DeprecationWarning, match="use job_run"):
            result = await hero.run_job({"script": "print(1)", "script_type": "python"}, wait=30)
        assert result["status"] == "finished"


# -- subscriptions ---------------------------------------------------------------------------


async def test_subscribe_delivers_a_jobs_events_in_order(
    server: Server, python_actor: Actor
) -> None:
    async with HeroClient(server.ws) as hero:
        created = await hero.job_create({"script": "print('x')", "script_type": "python"})
        job_id = created["job_id"]
        async with hero.subscribe(job_ids=[job_id], since="0") as stream:
            await hero.job_start(job_id)
            events = await events_of(stream, job_id)
        # only that job's (its print is a `log` event too if it outlived the first look)
        assert [e["event"] for e in events if e["event"] != "log"] == LIFECYCLE
        ids = [e["id"] for e in events]
        assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
        assert stream.last_id == ids[-1]


async def test_subscribe_delivers_live_log_lines_and_a_failed_jobs_stdout(
    server: Server, python_actor: Actor
) -> None:
    script = "import time\nprint('a')\ntime.sleep(0.6)\nprint('b')\ntime.sleep(0.6)\n1/0"
    async with HeroClient(server.ws) as hero:
        job_id = (await hero.job_create({"script": script, "script_type": "python"}))["job_id"]
        async with hero.subscribe(job_ids=[job_id]) as stream:
            await hero.job_start(job_id)
            events = []
            async for event in stream:
                events.append(event)
                if event["event"] == "log" and event.get("lines") == "a":
                    assert (await hero.job_status(job_id))["status"] == "started"
                    assert (await hero.job_logs(job_id))["logs"] == "a\n"
                if event["event"] == "error":
                    break
        lines = "\n".join(e["lines"] for e in events if e["event"] == "log").split("\n")
        assert lines[:2] == ["a", "b"] and lines[-1] == "ZeroDivisionError: division by zero"
        assert events[-1]["output"] == "a\nb\n"
        result = await hero.job_output(job_id)
        assert result["output"] == "a\nb\n"
        assert (result["error"] or "").endswith("ZeroDivisionError: division by zero")


# -- auth ------------------------------------------------------------------------------------


async def test_key_auth_by_header_and_by_login(server: Server, sup: Supervisor) -> None:
    key = await KeyStore(sup.wire, sup.config.redis).create("client-test", "admin")
    for auth in ("header", "login"):
        async with HeroClient(server.ws, key=key, auth=auth) as hero:
            me = await hero.auth_whoami()
            assert (me["name"], me["scope"]) == ("client-test", "admin")
    with pytest.raises(Unauthenticated) as refused:
        async with HeroClient(server.ws, key="not-a-key", connect_timeout=5):
            pass
    assert refused.value.code == -32004
    with pytest.raises(Unauthenticated):
        async with HeroClient(server.ws, key="not-a-key", auth="login", connect_timeout=5):
            pass
    async with HeroClient(server.ws, connect_timeout=5) as anonymous:
        with pytest.raises(Unauthenticated):
            await anonymous.job_list()


# -- restart ---------------------------------------------------------------------------------


async def test_subscription_survives_a_gateway_restart(
    own_server: Server, python_actor: Actor, sup: Supervisor
) -> None:
    """Events that happen while the gateway is down are replayed after the
    reconnect (``since`` = last id seen); none is lost, none is repeated."""
    async with HeroClient(own_server.ws, backoff=(0.05, 0.5)) as hero:
        stream = await hero.subscribe(script_type="python")
        before = await hero.run("print('before')", wait=30)
        seen = await events_of(stream, before["job_id"])

        # in flight across the restart: its answer is lost with the socket, run() asks
        # again after the reconnect and gets the same job's result (no second job)
        slow = asyncio.create_task(
            hero.run("import time; time.sleep(2.5); print('slow')", wait=30, job_id="across")
        )
        await eventually(lambda: started(sup, "across"))
        await asyncio.to_thread(own_server.stop)
        assert not slow.done()
        # a call made while the gateway is away waits for it instead of failing
        pending = asyncio.create_task(hero.job_status(before["job_id"], timeout=30))
        down = await sup.run({"script": "print('while down')", "script_type": "python"}, 30)
        assert down["status"] == "finished"
        # the call must outlast the outage; no event marks "still waiting": time passes
        await asyncio.sleep(0.3)
        assert not pending.done()
        await asyncio.to_thread(own_server.restart)

        assert (await pending)["status"] == "finished"
        assert await slow == {
            "job_id": "across",
            "status": "finished",
            "output": "slow\n",
            "error": None,
        }
        seen += await events_of(stream, down["job_id"])
        after = await hero.run("print('after')", wait=30)
        seen += await events_of(stream, after["job_id"])
        await stream.close()

    assert hero.reconnects >= 1
    # a job's print is also a `log` event when the job outlived the actor's first look
    for job_id in (before["job_id"], down["job_id"], after["job_id"], "across"):
        kinds = [e["event"] for e in seen if e["job_id"] == job_id]
        assert [e for e in kinds if e != "log"] == LIFECYCLE  # "across": one run
    assert [e["event"] for e in seen if e["job_id"] == "across"].count("log") == 1
    ids = [e["id"] for e in seen]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
