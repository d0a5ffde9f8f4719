// BullMQ peer: the same workloads as bench/peers/base.py, in Node.
//
//   node bullmq_bench.mjs worker --url URL --concurrency 10
//   node bullmq_bench.mjs throughput --url URL --jobs 20000 --runs 3 --procs 2 --concurrency 10
//   node bullmq_bench.mjs latency --url URL --calls 2000 --runs 3
//
// Workers are BullMQ's standard Worker (one process each, `concurrency` jobs at
// a time); the no-op processor returns the job's payload. Enqueue: Queue.addBulk
// (500 per call). Pending: the completed set's growth (polled every 2 ms after the
// last enqueue). Results: every job's returnvalue. Run-and-wait: Queue.add +
// Job.waitUntilFinished(QueueEvents). Prints one BENCH-RESULT line.

import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Queue, QueueEvents, Worker } from "bullmq";
import IORedis from "ioredis";

const QUEUE = "bench";

function args() {
  const a = { mode: process.argv[2], jobs: 20000, calls: 2000, runs: 3, procs: 2, concurrency: 10 };
  for (let i = 3; i < process.argv.length; i += 2) {
    const k = process.argv[i].replace(/^--/, "");
    a[k] = ["url"].includes(k) ? process.argv[i + 1] : Number(process.argv[i + 1]);
  }
  if (!a.url) throw new Error("--url is required");
  return a;
}

function connection(url) {
  return new IORedis(url, { maxRetriesPerRequest: null });
}

const log = (msg) => process.stderr.write(`[bench ${new Date().toTimeString().slice(0, 8)}] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
function pct(xs, q) { const s = [...xs].sort((a, b) => a - b); const r = Math.max(1, Math.min(s.length, Math.round((q / 100) * s.length + 0.5))); return s[r - 1]; }

async function worker(a) {
  const w = new Worker(QUEUE, async (job) => job.data.payload, {
    connection: connection(a.url), concurrency: a.concurrency,
  });
  const stop = async () => { await w.close(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

function startWorkers(a, n) {
  const self = fileURLToPath(import.meta.url);
  const kids = [];
  for (let i = 0; i < n; i++) {
    kids.push(spawn(process.execPath, [self, "worker", "--url", a.url, "--concurrency", String(a.concurrency)], { stdio: ["ignore", "ignore", "inherit"] }));
  }
  return kids;
}

async function stopWorkers(kids) {
  await Promise.all(kids.map((k) => new Promise((res) => { k.on("exit", res); k.kill("SIGTERM"); })));
}

async function redisCpu(redis) {
  const info = await redis.info("cpu");
  const get = (k) => Number((info.match(new RegExp(`${k}:([0-9.]+)`)) || [0, 0])[1]);
  return get("used_cpu_user") + get("used_cpu_sys");
}

async function oneRun(a, queue, redis, tag, n, timeoutMs) {
  const completedKey = `bull:${QUEUE}:completed`;
  const base = await redis.zcard(completedKey);
  const items = Array.from({ length: n }, (_, i) => ({ name: "noop", data: { payload: `out-${tag}-${i}` }, opts: { jobId: `${tag}-${i}` } }));
  const cpu0 = await redisCpu(redis);
  const t0 = performance.now();
  for (let i = 0; i < n; i += 500) await queue.addBulk(items.slice(i, i + 500));
  const tEnq = performance.now();
  const deadline = Date.now() + timeoutMs;
  while ((await redis.zcard(completedKey)) - base < n) {
    if (Date.now() > deadline) throw new Error(`bullmq: not done after ${timeoutMs} ms`);
    await sleep(2);
  }
  const tEnd = performance.now();
  const redisUs = ((await redisCpu(redis)) - cpu0) / n * 1e6;
  let wrong = 0;
  for (let i = 0; i < n; i += 2000) {
    const pipe = redis.pipeline();
    const chunk = items.slice(i, i + 2000);
    for (const it of chunk) pipe.hget(`bull:${QUEUE}:${it.opts.jobId}`, "returnvalue");
    const rows = await pipe.exec();
    chunk.forEach((it, j) => { const [err, raw] = rows[j]; if (err || raw == null || JSON.parse(raw) !== it.data.payload) wrong++; });
  }
  const elapsed = (tEnd - t0) / 1000;
  return { jobs: n, elapsed_s: elapsed, enqueue_s: (tEnq - t0) / 1000, jobs_per_s: n / elapsed, wrong, verified: wrong === 0, cpu_us_per_job: { redis: Math.round(redisUs * 10) / 10 } };
}

async function throughput(a) {
  const queue = new Queue(QUEUE, { connection: connection(a.url), defaultJobOptions: { removeOnComplete: false } });
  const redis = connection(a.url);
  const kids = startWorkers(a, a.procs);
  try {
    await oneRun(a, queue, redis, `warm-${Date.now()}`, 100 * a.procs, 120000);
    const results = [];
    for (let r = 0; r < a.runs; r++) {
      const res = await oneRun(a, queue, redis, `bullmq-${Date.now()}-${r}`, a.jobs, 300000);
      log(`bullmq run ${r + 1}: ${res.jobs_per_s.toFixed(0)} jobs/s (enqueue ${res.enqueue_s.toFixed(2)}s, verified=${res.verified})`);
      results.push(res);
    }
    const rates = results.map((x) => x.jobs_per_s);
    return { jobs_per_s: median(rates), runs: rates, cpu_us_per_job: { redis: median(results.map((x) => x.cpu_us_per_job.redis)) }, verified: results.every((x) => x.verified), detail: results, procs: a.procs, concurrency: a.concurrency, concurrency_note: "Worker concurrency per process" };
  } finally {
    await stopWorkers(kids);
    await queue.close();
    redis.disconnect();
  }
}

async function latency(a) {
  const queue = new Queue(QUEUE, { connection: connection(a.url) });
  const events = new QueueEvents(QUEUE, { connection: connection(a.url) });
  await events.waitUntilReady();
  const kids = startWorkers(a, 1);
  try {
    const call = async (payload) => {
      const job = await queue.add("noop", { payload });
      return job.waitUntilFinished(events, 10000);
    };
    for (let i = 0; i < 30; i++) { if ((await call(`w${i}`)) !== `w${i}`) throw new Error("wrong warm-up result"); }
    const perRun = [];
    for (let r = 0; r < a.runs; r++) {
      const ms = [];
      for (let i = 0; i < a.calls; i++) {
        const payload = `lat-${r}-${i}`;
        const t = performance.now();
        const res = await call(payload);
        ms.push(performance.now() - t);
        if (res !== payload) throw new Error(`wrong result ${res}`);
      }
      const s = { p50_ms: pct(ms, 50), p99_ms: pct(ms, 99), mean_ms: ms.reduce((x, y) => x + y, 0) / ms.length, max_ms: Math.max(...ms), calls: ms.length };
      log(`bullmq latency run ${r + 1}: p50 ${s.p50_ms.toFixed(3)} ms, p99 ${s.p99_ms.toFixed(3)} ms`);
      perRun.push(s);
    }
    return { p50_ms: median(perRun.map((x) => x.p50_ms)), p99_ms: median(perRun.map((x) => x.p99_ms)), runs: perRun, verified: true, procs: 1 };
  } finally {
    await stopWorkers(kids);
    await events.close();
    await queue.close();
  }
}

const a = args();
if (a.mode === "worker") {
  await worker(a);
} else {
  const result = a.mode === "throughput" ? await throughput(a) : await latency(a);
  console.log("BENCH-RESULT " + JSON.stringify(result));
  process.exit(0);
}
