// Small DOM and formatting helpers shared by the page's modules.

import { RpcError, Unauthenticated } from "/client/hero-client.js";

export const $ = (id) => document.getElementById(id);

/** An element with text (never innerHTML: job scripts, output and logs are untrusted). */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export const TERMINAL = new Set(["finished", "error", "stopped", "timeout", "dlq"]);
/** Events that report on a running job rather than move it (no status change). */
export const PROGRESS_EVENTS = new Set(["log", "progress"]);

export const short = (id) => (id && id.length > 12 ? id.slice(0, 12) + "…" : id || "");
export const clock = (ms) => (ms ? new Date(ms).toLocaleTimeString() : "");
export const num = (v, digits = 2) => (typeof v === "number" ? v.toFixed(digits) : "–");
export const percent = (v) => (typeof v === "number" ? `${(v * 100).toFixed(0)} %` : "–");

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function statusBadge(status) {
  return el("span", { class: `status status-${status}`, text: status });
}

/**
 * A message for the operator (the client's typed errors, never a stack).
 * `keyGiven`: the page sent a key, so a refusal means that key (wrong, or
 * revoked while the page was open), not that one is missing.
 */
export function explain(err, keyGiven = false) {
  if (err instanceof Unauthenticated || (err instanceof RpcError && err.code === -32004)) {
    return keyGiven
      ? `The gateway refused this key (${err.message}): enter another one above.`
      : "This gateway needs an API key: enter one above.";
  }
  if (err instanceof RpcError) return `${err.message} (code ${err.code})`;
  return err && err.message ? err.message : String(err);
}
