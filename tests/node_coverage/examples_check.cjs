// The OpenRPC ecosystem's own test runner, @open-rpc/test-coverage, with its
// examples rule against a live gateway: every example pairing of the served
// contract is called (in document order) and its result compared with the
// example's, exactly or else by the result schema. Calls go over one WebSocket,
// because subscriptions live on a connection (the package's own transport is
// HTTP only).
//
//   node examples_check.cjs ws://127.0.0.1:PORT/ws   (NODE_PATH: the installed packages)
//
// Prints one JSON line: the served methods, each call's outcome, and the
// served script_type enum.
"use strict";

const { isDeepStrictEqual } = require("node:util");
const WebSocket = require("ws");
const coverage = require("@open-rpc/test-coverage").default;
const ExamplesRule = require("@open-rpc/test-coverage/build/rules/examples-rule").default;
const { parseOpenRPCDocument } = require("@open-rpc/schema-utils-js");

async function connect(url) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const waiting = new Map();
  let next = 1;
  ws.on("message", (data) => {
    const message = JSON.parse(data.toString());
    const answer = waiting.get(message.id); // notifications have no id
    if (answer) {
      waiting.delete(message.id);
      answer(message);
    }
  });
  const call = (method, params) =>
    new Promise((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  return { ws, call };
}

// `format` is an annotation in the contract's JSON Schema 2020-12; the rule's
// Ajv 7 asserts it, knows no "date-time", and would fail the compile (so the
// call) without checking anything. Everything else of the schema stays.
function dropFormats(node, seen = new Set()) {
  if (node === null || typeof node !== "object" || seen.has(node)) return;
  seen.add(node);
  if (typeof node.format === "string") delete node.format;
  for (const value of Object.values(node)) dropFormats(value, seen);
}

async function main() {
  const { ws, call } = await connect(process.argv[2]);
  const served = (await call("rpc.discover", {})).result;
  const doc = await parseOpenRPCDocument(served);
  for (const method of doc.methods) dropFormats(method.result.schema);
  const calls = [];
  const reporter = {
    onBegin() {},
    onTestBegin() {},
    onTestEnd() {},
    onEnd(_options, all) {
      calls.push(...all);
    },
  };
  await coverage({
    openrpcDocument: doc,
    transport: (_url, method, params) => call(method, params),
    reporters: [reporter],
    rules: [new ExamplesRule()],
  });
  ws.close();
  console.log(
    JSON.stringify({
      methods: doc.methods.map((m) => m.name),
      calls: calls.map((c) => ({
        method: c.methodName,
        title: c.title,
        valid: c.valid === true,
        exact: isDeepStrictEqual(c.result, c.expectedResult),
        reason: c.reason ?? (c.error ? JSON.stringify(c.error) : undefined),
      })),
      script_type_enum: served.components.schemas.JobSpec.properties.script_type.enum ?? null,
    }),
  );
}

main().catch((error) => {
  const text = error instanceof Error ? error.stack : JSON.stringify(error);
  console.log(JSON.stringify({ crash: text }));
  process.exit(1);
});
