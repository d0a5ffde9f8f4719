// Driven by tests/test_client_js.py: the generated JS client's features against a real
// gateway (argv[2]: ws url, argv[3]: an admin API key, or "" when the server has none).
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code says whether all passed.
import assert from "node:assert/strict";
import {
  CallTimeout,
  ERRORS,
  HeroClient,
  HeroClientError,
  InvalidParams,
  JobNotFound,
  RpcError,
  Unauthenticated,
} from "../../clients/js/hero-client.js";
import { webSocket } from "./websocket.mjs";

const [url, key] = process.argv.slice(2);
const WebSocket = await webSocket();
const client = (options = {}) => new HeroClient(url, { WebSocket, key: key || undefined, ...options });
const camel = (name) =>
  name
    .split(/[^0-9A-Za-z]+/)
    .map((part, i) => (i ? part[0].toUpperCase() + part.slice(1) : part))
    .join("");

const checks = {
  async "every method of the contract is a client method"(hero) {
    const doc = await hero.rpcDiscover();
    for (const method of doc.methods) {
      assert.equal(typeof hero[camel(method.name)], "function", method.name);
    }
    for (const error of doc.components.errors ? Object.values(doc.components.errors) : []) {
      assert.ok(ERRORS[String(error.code)], `no class for ${error.code}`);
    }
  },

  async "run waits for the result; a failed job is a result"(hero) {
    const ok = await hero.run({ script: "print('hi from node')", script_type: "python" }, { wait: 30 });
    assert.equal(ok.status, "finished");
    assert.equal(ok.output, "hi from node\n");
    const bad = await hero.run({ script: "raise SystemExit('no')", script_type: "python" });
    assert.equal(bad.status, "error");
  },

  async "subscribe is an async iterator of a job's events"(hero) {
    const { job_id } = await hero.jobCreate({ job: { script: "print(1)", script_type: "python" } });
    const stream = await hero.subscribe({ job_ids: [job_id], since: "0-0" }); // from the start
    await hero.jobStart({ job_id });
    const seen = [];
    for await (const event of stream) {
      if (event.event !== "log") seen.push(event.event); // a live line, if it outlived the first look
      if (event.event === "finished") break; // break → return() → unsubscribes
    }
    assert.deepEqual(seen, ["created", "dispatched", "started", "finished"]);
    assert.ok(stream.lastId);
  },

  async "a running job's log lines arrive as events; a failed job keeps its stdout"(hero) {
    const script = "import time\nprint('a')\ntime.sleep(0.6)\nprint('b')\ntime.sleep(0.6)\nraise SystemExit('no')";
    const { job_id } = await hero.jobCreate({ job: { script, script_type: "python" } });
    const stream = await hero.subscribe({ job_ids: [job_id] });
    await hero.jobStart({ job_id });
    const lines = [];
    let last;
    for await (const event of stream) {
      if (event.event === "log") lines.push(...event.lines.split("\n"));
      if (event.event === "log" && lines.length === 1) {
        assert.equal((await hero.jobStatus({ job_id })).status, "started"); // live
        assert.equal((await hero.jobLogs({ job_id })).logs, "a\n");
      }
      last = event;
      if (event.event === "error") break;
    }
    assert.deepEqual(lines, ["a", "b", "no"]); // stdout and stderr
    assert.equal(last.output, "a\nb\n");
    assert.equal(last.error, "no");
    assert.equal((await hero.jobOutput({ job_id })).output, "a\nb\n");
  },

  async "server errors are classes carrying the code"(hero) {
    const missing = await hero.jobGet({ job_id: "no-such-job" }).catch((e) => e);
    assert.ok(missing instanceof JobNotFound);
    assert.ok(missing instanceof RpcError && missing instanceof HeroClientError);
    assert.equal(missing.code, -32001);
    assert.equal(missing.name, "JobNotFound");
    const invalid = await hero
      .jobCreate({ job: { script: "x", script_type: "python", priority: 9 } })
      .catch((e) => e);
    assert.ok(invalid instanceof InvalidParams);
    assert.equal(invalid.code, -32602);
    assert.match(JSON.stringify(invalid.data), /priority/);
  },

  async "per-call timeouts"(hero) {
    const job_id = "js-slow-call";
    const err = await hero
      .jobRun({ job: { script: "import time; time.sleep(30)", script_type: "python", job_id } }, { timeoutMs: 300 })
      .catch((e) => e);
    assert.ok(err instanceof CallTimeout, String(err));
    assert.equal((await hero.jobStop({ job_id })).status, "stopped");
    assert.ok((await hero.authWhoami()).scope); // the connection survived the timeout
  },

  async "deprecated Hero names still work"(hero) {
    const created = await hero.createJob({ job: { script: "print(2)", script_type: "python" } });
    assert.equal(created.status, "created");
    assert.equal((await hero.deleteJob({ job_id: created.job_id })).deleted, true);
  },

  async "a refused key fails the client for good"() {
    if (!key) return;
    const statuses = [];
    const bad = new HeroClient(url, { WebSocket, key: "not-a-key", onStatus: (s) => statuses.push(s) });
    const err = await bad.connect().catch((e) => e);
    assert.ok(err instanceof Unauthenticated, String(err));
    assert.equal(err.code, -32004);
    assert.equal(statuses.at(-1), "failed");
    await bad.close();
    const me = await client().authWhoami();
    assert.equal(me.scope, "admin");
  },
};

let failed = 0;
const hero = client();
await hero.connect();
for (const [name, check] of Object.entries(checks)) {
  try {
    await check(hero);
    console.log(`ok ${name}`);
  } catch (err) {
    failed += 1;
    console.log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`);
  }
}
await hero.close();
process.exit(failed ? 1 : 0);
