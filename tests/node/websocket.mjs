// The WebSocket constructor for these scripts: Node 22+ has one built in; on Node 18/20
// the `ws` package (installed by `npm ci` here) stands in, injected into the client.
export async function webSocket() {
  if (typeof globalThis.WebSocket === "function") return globalThis.WebSocket;
  const ws = await import("ws");
  return ws.WebSocket ?? ws.default;
}
