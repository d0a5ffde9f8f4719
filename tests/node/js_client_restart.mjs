// Driven by tests/test_client_js.py: the generated JS client keeps a subscription
// across a gateway restart. Prints one JSON object per line on stdout:
//   {"ready": true}             subscribed (script_type python)
//   {"event": {...}}            each job.event delivered
//   {"status": "open", ...}     connection status changes
//   {"result": {...}}           answer to a "run <script>" line on stdin
//   {"bg": {...}}               answer to a "bg <job_id> <script>" line (run in the background)
// and reads commands on stdin: "run <python script>", "bg <job_id> <script>", "quit".
import readline from "node:readline";
import { HeroClient } from "../../clients/js/hero-client.js";
import { webSocket } from "./websocket.mjs";

const url = process.argv[2];
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const hero = new HeroClient(url, {
  WebSocket: await webSocket(),
  backoffMs: [50, 500],
  onStatus: (status) => say({ status, reconnects: hero.reconnects }),
});
const stream = await hero.subscribe({ script_type: "python" }, { onEvent: (event) => say({ event }) });
say({ ready: true });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line === "quit") break;
  if (line.startsWith("bg ")) {
    const [, job_id, ...script] = line.split(" ");
    hero
      .run({ script: script.join(" "), script_type: "python", job_id }, { wait: 30 })
      .then((bg) => say({ bg }), (err) => say({ bgError: String(err) }));
  } else if (line.startsWith("run ")) {
    const script = line.slice(4);
    try {
      say({ result: await hero.run({ script, script_type: "python" }, { wait: 30 }) });
    } catch (err) {
      say({ error: String(err), code: err.code ?? null });
    }
  }
}
lines.close();
process.stdin.destroy(); // nothing more to read: let Node exit
await stream.close();
await hero.close();
say({ done: true, lastId: stream.lastId, reconnects: hero.reconnects });
