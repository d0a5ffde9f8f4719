"""The private redis-server: extra settings and a command to run it under.

bench/lua_cost.py runs it under callgrind with the operator's settings; these
check both against a real redis-server, with a shell as the wrapper that
leaves a mark and execs redis-server in its own process, as valgrind does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gateway.embedded_redis import EmbeddedRedis

pytestmark = pytest.mark.timeout(30)


def test_settings_reach_the_server_and_override_the_defaults(tmp_path: Path) -> None:
    server = EmbeddedRedis(
        tmp_path,
        appendonly=False,
        settings={"hash-max-listpack-entries": "16", "maxclients": "100"},
    ).start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        assert client.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "16"}
        assert client.config_get("maxclients") == {"maxclients": "100"}  # ours says 20000
    finally:
        client.close()
        server.stop()


def test_the_server_runs_under_the_wrapper_and_stops_with_it(tmp_path: Path) -> None:
    mark = tmp_path / "wrapped"
    wrapper = ("sh", "-c", f'echo $$ > {mark}; exec "$@"', "sh")
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False, wrapper=wrapper).start()
    assert server.process is not None
    pid = server.process.pid
    client = redis.Redis.from_url(server.url)
    try:
        assert client.ping()
        assert mark.read_text().strip() == str(pid)  # the wrapper ran, as this very process
        assert client.info("server")["process_id"] == pid  # and became redis-server
    finally:
        client.close()
        server.stop()
    assert server.process.poll() is not None
    assert not Path(f"/proc/{pid}").exists()
