"""The OpenRPC ecosystem's own tools judge the served contract.

tests/test_contract.py validates the document against the vendored meta-schema
in Python; here the reference implementations do it over the wire, as any
OpenRPC consumer would: ``@open-rpc/client-js`` fetches ``rpc.discover`` over
WebSocket from a real gateway, ``@open-rpc/schema-utils-js`` validates and
dereferences it and checks a call's params, and a ``job.run`` made through
client-js comes back finished from a real actor. Needs node and npm (the test
runs ``npm ci`` in tests/node once); skipped, saying so, where node is absent.
"""

from __future__ import annotations

from pathlib import Path

from gateway.actor import Actor
from tests.node_support import node_report
from tests.server_support import Server


async def test_served_contract_passes_the_openrpc_tools(
    server: Server, python_actor: Actor, node_modules: Path
) -> None:
    report = await node_report("openrpc_check.mjs", server.ws, within=90)
    assert report["valid"] is True, report["valid"]
    assert report["dereferenced"] is True
    assert report["paramsValid"] is True
    assert report["badParamsRejected"] is True
    assert report["result"]["status"] == "finished"
    assert report["result"]["output"] == "via open-rpc\n"
    assert report["error"]["code"] == -32001
