// Driven by tests/test_client_openrpc_ecosystem.py: the OpenRPC tools themselves judge the
// gateway. Over a WebSocket, @open-rpc/client-js asks for rpc.discover; the document it gets
// must pass @open-rpc/schema-utils-js (validate and dereference), a job.run call's params must
// pass its MethodCallValidator, and the call itself must come back finished.
// argv[2]: ws url. Prints one JSON object; exit code 0 when every check passed.
import { Client, RequestManager, WebSocketTransport } from "@open-rpc/client-js";
import {
  MethodCallValidator,
  parseOpenRPCDocument,
  validateOpenRPCDocument,
} from "@open-rpc/schema-utils-js";

const url = process.argv[2];
const report = {};
const transport = new WebSocketTransport(url);
const client = new Client(new RequestManager([transport]));
try {
  const doc = await client.request({ method: "rpc.discover", params: {} });
  report.methods = doc.methods.length;

  const valid = validateOpenRPCDocument(structuredClone(doc));
  report.valid = valid === true ? true : String(valid && valid.message ? valid.message : valid);

  const parsed = await parseOpenRPCDocument(structuredClone(doc));
  report.dereferenced = parsed.methods.every((m) => m.params.every((p) => !("$ref" in p)));

  const params = { job: { script: "print('via open-rpc')", script_type: "python" }, wait: 30 };
  const validator = new MethodCallValidator(parsed);
  const problems = validator.validate("job.run", params);
  report.paramsValid = Array.isArray(problems) && problems.length === 0 ? true : String(problems);
  const bad = validator.validate("job.run", { job: { script: 1 } });
  report.badParamsRejected = Array.isArray(bad) ? bad.length > 0 : Boolean(bad);

  report.result = await client.request({ method: "job.run", params }, 30000);

  try {
    await client.request({ method: "job.get", params: { job_id: "no-such-job" } });
    report.error = null;
  } catch (err) {
    report.error = { code: err.code, message: err.message };
  }
} catch (err) {
  report.crash = String(err && err.stack ? err.stack : err);
} finally {
  client.close();
}
console.log(JSON.stringify(report));
const ok =
  report.valid === true &&
  report.dereferenced === true &&
  report.paramsValid === true &&
  report.badParamsRejected === true &&
  report.result?.status === "finished" &&
  report.error?.code === -32001;
process.exit(ok ? 0 : 1);
