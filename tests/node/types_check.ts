// Compiled (never run) by tests/test_codegen.py with tsc --noEmit: hero-client.d.ts must be
// valid TypeScript and describe the client the way the README uses it. The lines marked as
// expected errors must stay errors: they prove the types reject wrong params.
import {
  CallTimeout,
  type Event,
  EventStream,
  HeroClient,
  type Identity,
  type JobResult,
  JobNotFound,
  type QueueStats,
  RpcError,
} from "../../clients/js/hero-client.js";

export async function use(WebSocket: unknown): Promise<string[]> {
  const hero = new HeroClient("ws://127.0.0.1:8080/ws", { key: "k", timeoutMs: 5000, WebSocket });
  const result: JobResult = await hero.run({ script: "print(1)", script_type: "python" }, { wait: 5 });
  const me: Identity = await hero.authWhoami();
  const queues: QueueStats[] = (await hero.queueStats({ script_type: "python" })).queues;
  const page = await hero.jobList({ status: "finished", limit: 10 });
  const stream: EventStream<Event> = await hero.subscribe(
    { script_type: "python", since: "0-0" },
    { onEvent: (event: Event) => void event.job_id },
  );
  const seen: string[] = [];
  for await (const event of stream) {
    seen.push(`${event.id} ${event.status} ${event.attempt + 1}`);
    const live: string | undefined = event.event === "log" ? event.lines : event.message;
    if (event.progress !== undefined) seen.push(`${Math.round(event.progress * 100)}% ${live}`);
    break;
  }
  await stream.close();
  try {
    await hero.jobGet({ job_id: "x" }, { timeoutMs: 100 });
  } catch (err) {
    if (err instanceof JobNotFound || err instanceof CallTimeout) seen.push(String(err));
    if (err instanceof RpcError) seen.push(String(err.code));
  }
  const report = await hero.statsReport();
  if (report !== null) seen.push(Object.keys(report).join());
  // @ts-expect-error job_id is required
  await hero.jobGet({});
  // @ts-expect-error priority is a number
  await hero.jobCreate({ job: { script: "x", script_type: "python", priority: "high" } });
  // @ts-expect-error not a status
  await hero.jobList({ status: "done" });
  await hero.close();
  return [...seen, result.status, me.scope, String(queues.length), String(page.jobs.length)];
}
